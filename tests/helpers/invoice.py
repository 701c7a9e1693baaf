"""The README's invoice pipeline data: one query and the passages it searches."""

INVOICE_QUERY = "How much do we owe Acme Corp, and when is it due?"

INVOICE_PASSAGES = {
    "invoice": (
        "Invoice INV-2024-0117 from Acme Corp: 12 hours of consulting, total due 4,250.00 EUR by 31 March 2024."
    ),
    "contract": (
        "The master services agreement with Acme Corp renews every January and can be cancelled with 60 days notice."
    ),
    "travel": "Our travel policy reimburses economy-class flights for trips shorter than six hours.",
    "report": "Acme Corp reported quarterly revenue growth of 8% in the EMEA region.",
    "cafeteria": "The cafeteria on the second floor serves lunch from 12:00 to 14:00 on weekdays.",
}
