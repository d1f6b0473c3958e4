"""The compute API: Nova's request and response shapes over Billeting's
API database, cells, super conductor and scheduler (``make_app``)."""
