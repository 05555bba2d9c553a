/*
 * etags.h - the ETags (SHA-256 of the content) codepod already knows, so a
 * file read need not hash the whole file again before its first byte.
 *
 * The runner that hashed a file tells what it saw of it: its device,
 * inode, size, mtime and ctime (nanoseconds), only when its ctime was older
 * than the file system's timestamp granularity at the time (runner/runner.js,
 * "known etags"). The next read of the same path in the same conversation
 * gets those back in its hello, and the runner uses the ETag only when
 * fstat of the file it opened shows all five unchanged; else it hashes.
 *
 * Why that is sound: every change to a file's content moves its ctime to
 * the time of the change, and no program can set ctime. A change after the
 * hashing gets a ctime no earlier than the clock then, minus the
 * granularity, so later than the recorded one, which was older than that;
 * a file replaced by another (a rename, a delete and create, a snapshot
 * restored) has another inode or a newer ctime. What it assumes: the
 * workspace's file system stamps times from the clock the runner reads (a
 * local file system: the local backend's, a pod's emptyDir), and that
 * clock is not set back past the recorded ctime.
 *
 * Bounded: CODEPOD_ETAGS_MAX entries, the oldest replaced. Loop thread only.
 * Ownership: the engine's (struct codepod); json values passed in are
 * borrowed, codepod_etags_hint returns a new reference.
 */
#ifndef CODEPOD_ETAGS_H
#define CODEPOD_ETAGS_H

#include <jansson.h>

#define CODEPOD_ETAGS_MAX 512

struct codepod_etags;

/* NULL when out of memory (then nothing is known: every read hashes). */
struct codepod_etags *codepod_etags_new(void);
void codepod_etags_free(struct codepod_etags *t);

/* What is known of @path in @conversation: {"seen":{...},"etag":"..."}
 * (new reference), or NULL. */
json_t *codepod_etags_hint(const struct codepod_etags *t, const char *conversation,
                           const char *path);

/* A runner hashed @path to @etag and saw @seen ({"dev","ino","size",
 * "mtime","ctime"}, decimal strings); a malformed @seen is ignored. */
void codepod_etags_note(struct codepod_etags *t, const char *conversation, const char *path,
                        const json_t *seen, const char *etag);

/* The conversation's workspace is gone: forget its files. */
void codepod_etags_forget(struct codepod_etags *t, const char *conversation);

#endif
