"""``conli serve``: check, rewrite and judge over HTTP (a front door's room).

``app`` builds the FastAPI app; ``runner`` runs a request's check; ``guard`` holds the
Host/Origin and key checks; ``bodies`` the request models; ``problems`` the RFC 9457
answers; ``ops`` health, readiness and metrics; ``batch_route`` ``/v1/batch``; ``stream``
the NDJSON streaming endpoint. Imports FastAPI only inside; nothing below imports it.
"""
