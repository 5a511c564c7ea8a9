"""Package version (pbr)."""

import pbr.version

version_info = pbr.version.VersionInfo('dtn-migrate')
version_string = version_info.version_string
