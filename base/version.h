/*
 * version.h - codepod's release, one string for `codepod --version`, the
 * hello message and GET /v1/info (and so for the Debian package's version,
 * which scripts/deb.sh reads from --version).
 */
#ifndef CP_VERSION_H
#define CP_VERSION_H

#define CP_VERSION "0.1.0"

#endif
