"""The assistant as an HTTP service: the app, one turn as events, the API's shapes, auth and a served process."""
