"""The readable reports, HTML, JUnit XML and Markdown, and the per-record outcomes they share."""
