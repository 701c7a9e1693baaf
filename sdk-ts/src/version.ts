/** The SDK version (one place; equal to package.json's and to the Python SDK's). */
export const VERSION = "0.1.0";
