/* srcfile.h - opening the source file of an environment or a module:
 * confined to the folder it was found in, a regular file, bounded in size
 * (see srcfile.c and docs/sandbox.md, "Source files"). */
#ifndef LUDO_SCRIPT_SRCFILE_H
#define LUDO_SCRIPT_SRCFILE_H

#include <lua.h>
#include <stddef.h>

/* The largest source file read: 16 MiB. */
#define LUDO__SRCFILE_MAX ((size_t)16 << 20)

/* An open source file. */
typedef struct ludo__srcfile_s {
  int fd;           /* open for reading; -1 when closed */
  size_t size;      /* its size when it was opened */
  const char *path; /* borrowed: the path it was opened by */
} ludo__srcfile_t;

/* Opens `path`, a candidate found in the folder `root`. Its real path
 * (symbolic links followed) must be below the real path of `root`, and
 * it must be a regular file of at most LUDO__SRCFILE_MAX bytes; it is
 * opened without blocking, so a FIFO cannot hold the caller. Returns 0
 * with f open (the caller closes it with ludo__srcfile_close);
 * LUDO_ENOENT when nothing is at `path`; LUDO_ELOAD when the file is
 * refused, with why (n bytes) saying why, never what the file holds.
 * Both strings are borrowed for the call, `path` until f is closed. */
int ludo__srcfile_open(const char *root, const char *path,
                       ludo__srcfile_t *f, char *why, size_t n);

/* Pushes the file's text, at most f->size bytes, as a string allocated
 * by L (it counts against L's memory cap). Raises ELOAD on a read error
 * and a memory error; f stays open either way. [-0, +1, e] */
void ludo__srcfile_push(lua_State *L, ludo__srcfile_t *f);

/* Closes f (no-op when it is closed). */
void ludo__srcfile_close(ludo__srcfile_t *f);

#endif
