"""Build a staging backend and copy options from ``[staging]`` settings.

``settings`` is anything with the option names of ``[staging]`` as
attributes: ``CONF.staging`` in the services, a namespace in tests.
"""

from dtn_migrate.staging import copycommon
from dtn_migrate.staging import libnfs
from dtn_migrate.staging import localfs
from dtn_migrate.staging import nfsmount


def profile(settings):
    """The NFS mount profile the settings require."""
    return nfsmount.Profile(min_rsize=settings.min_rsize,
                            min_wsize=settings.min_wsize,
                            require_async=settings.require_async)


def open_backend(settings, mountinfo="/proc/self/mountinfo"):
    """The backend ``settings.backend`` names; a kernel path is checked
    against the mount profile first (``mount_check``, ``allow_local``).
    """
    if settings.backend == "libnfs":
        if not settings.url:
            raise ValueError("[staging] backend = libnfs needs [staging] "
                             "url (nfs://server/export/dir)")
        return libnfs.LibnfsBackend(settings.url)
    if settings.backend != "path":
        raise ValueError("unknown [staging] backend %r" % settings.backend)
    mount = nfsmount.verify(settings.path, profile(settings),
                            settings.mount_check, settings.allow_local,
                            mountinfo)
    return localfs.LocalBackend(settings.path,
                                direct_io=direct_io(settings, mount))


def direct_io(settings, mount):
    """Whether the path backend uses O_DIRECT: ``[staging] direct_io``,
    where "auto" means only off NFS (``mount`` is None).
    """
    choice = getattr(settings, "direct_io", "auto")
    if choice == "auto":
        return mount is None
    return choice == "on"


def copy_options(settings, margin_bytes):
    """:class:`copycommon.CopyOptions` for the settings; ``margin_bytes`` is
    ``free_space_margin`` already resolved against the export's size.
    """
    return copycommon.CopyOptions(
        block_size=settings.block_size, queue_depth=settings.queue_depth,
        writers=settings.writers, readers=settings.readers,
        commit_interval=settings.commit_interval_bytes,
        sync=settings.sync_writes, free_margin=margin_bytes,
        watermark_suffix=settings.watermark_suffix,
        skip_zeros=settings.skip_zeros,
        hash_checkpoint=settings.hash_checkpoint_bytes)
