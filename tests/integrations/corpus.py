"""The retrieval corpus: the README's invoice passages plus 50 distractors.

The distractors are office, travel and product texts; a few mention money, dates or other
companies, so the invoice passage has to win on meaning rather than on topic alone.
"""

from __future__ import annotations

from tests.helpers.invoice import INVOICE_PASSAGES, INVOICE_QUERY

DISTRACTORS = [
    "The quarterly all-hands meeting moves to the large auditorium on the ground floor.",
    "Please water the plants in the reception area every Monday and Thursday.",
    "Our parking garage closes at 22:00; overnight parking needs a written permit.",
    "The new coffee machine on the third floor makes espresso, cappuccino and tea.",
    "Security badges must be worn visibly at all times inside the building.",
    "The marketing team is planning a product launch event in Lisbon next spring.",
    "Remote employees can order a second monitor through the IT self-service portal.",
    "Fire drills happen twice a year; follow the green exit signs to the assembly point.",
    "The library in the east wing lends laptops for up to two weeks.",
    "Annual performance reviews start in November and finish before the holidays.",
    "Globex Industries opened a new warehouse near the port of Rotterdam.",
    "The bicycle storage room can be reached from the courtyard entrance.",
    "Our sustainability report shows a 12% cut in office energy use since 2021.",
    "New hires attend an onboarding workshop on their first Tuesday.",
    "The photocopier on floor two jams when fed with recycled paper.",
    "Conference rooms can be booked up to four weeks in advance in the calendar app.",
    "The engineering team migrated the build servers to a new data centre.",
    "Employees get 25 days of paid vacation plus public holidays.",
    "The company choir rehearses every Wednesday evening in room 4.12.",
    "Lost and found items are kept at the front desk for thirty days.",
    "The gym in the basement is open from 06:00 to 21:00 on weekdays.",
    "A vegetarian option is available on the cafeteria menu every day.",
    "Initech announced a partnership with a logistics start-up in Hamburg.",
    "The office will be closed on 24 and 31 December.",
    "Visitors must sign in at reception and receive a temporary badge.",
    "The design team switched to a new font for all customer presentations.",
    "Wi-Fi passwords for guests change every Monday morning.",
    "Our mentoring programme pairs junior staff with senior colleagues for six months.",
    "The server room temperature is kept at 20 degrees Celsius.",
    "A shuttle bus runs between the train station and the campus every 15 minutes.",
    "Umbrellas can be borrowed from the stand next to the main entrance.",
    "The legal department reviews every press release before publication.",
    "Quarterly hackathons let engineers spend two days on projects of their choice.",
    "The recycling bins are emptied every Friday afternoon.",
    "Team lunches are reimbursed up to a fixed amount per person per quarter.",
    "The window cleaners visit the building on the first Monday of each month.",
    "Our customer support hotline is staffed from 08:00 to 20:00.",
    "Standing desks are available on request for all employees.",
    "The product roadmap for next year will be presented at the strategy offsite.",
    "Printer toner is stored in the supply cabinet next to the kitchen.",
    "The summer party takes place in the park behind the office in July.",
    "Umbrella Corp hired a new chief technology officer last month.",
    "Keys for the meeting room cabinets are kept at the facilities desk.",
    "Our internal newsletter is published every second Thursday.",
    "Employees can work from abroad for up to four weeks a year.",
    "The elevator on the north side is out of service for maintenance this week.",
    "First-aid kits are located next to each fire extinguisher.",
    "The data science team trained a new forecasting model for warehouse demand.",
    "Meeting notes should be stored in the shared team folder.",
    "The rooftop terrace is open to staff when the weather allows.",
]

assert len(DISTRACTORS) == 50 and len(set(DISTRACTORS)) == 50

# id -> text, the invoice passages first.
CORPUS: dict[str, str] = {**INVOICE_PASSAGES, **{f"distractor-{i:02d}": text for i, text in enumerate(DISTRACTORS)}}
CORPUS_IDS = list(CORPUS)
CORPUS_TEXTS = list(CORPUS.values())
QUERY = INVOICE_QUERY
EXPECTED_ID = "invoice"
EXPECTED_TEXT = INVOICE_PASSAGES["invoice"]
