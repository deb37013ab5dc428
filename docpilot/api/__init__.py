"""DocPilot's HTTP API: the shapes the server writes and the client that reads them."""
