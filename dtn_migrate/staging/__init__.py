"""Staging: the local copy onto a DTN's NFS export and the remote copy
back from it.

A *backend* reaches the export (a kernel-mounted path, or the userspace
NFSv3 client libnfs); the copy engine moves image bytes through it with
an explicit durability point.  Like the transfer engine, this package
has no OpenStack imports: the migration service configures it.
"""
