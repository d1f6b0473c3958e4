"""A read-only Image API (the part of Glance v2 clients read) over Billeting's image catalog."""
