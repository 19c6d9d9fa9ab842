/* srcfile.c - opening the source file of an environment or a module (see
 * srcfile.h).
 *
 * An environment's folder comes from whoever wrote the environment, who
 * may also write hostile Lua: a `name.lua` there that is a symbolic link
 * to a host file would bring that file into the session (a file that is
 * not Lua still shows in the load error's text), one to /dev/zero would
 * be read without end into the runtime's heap, and a FIFO would block
 * the loop's thread in read(), where no budget reaches. So the file's
 * real path must stay below the real path of the folder it was found in
 * (a link that stays inside is fine), and it must be a regular file of
 * at most LUDO__SRCFILE_MAX bytes, checked before it is opened (lstat:
 * opening a device may do something) and again on the open descriptor
 * (fstat, the same file). It is opened with O_NONBLOCK, so even a FIFO
 * put there between the two checks cannot block the open.
 *
 * realpath, not openat with O_NOFOLLOW per component: links inside the
 * folder stay allowed without resolving them by hand. The path is
 * resolved, then opened; a process that swaps a folder for a link in
 * between could still send the open elsewhere, but that takes writing to
 * the folder while the runtime loads, which the sandbox's Lua cannot do
 * (it has no io): the threat here is the folder as it was written. */
#include "script/srcfile.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

/* Is the real path `path` below the real path `root`? */
static int below(const char *root, const char *path) {
  size_t n = strlen(root);
  if (n == 1 && root[0] == '/') return 1;
  return strncmp(root, path, n) == 0 && path[n] == '/';
}

static const char *kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

/* Refuses what is not a regular file of at most the cap. */
static int check_stat(const struct stat *sb, char *why, size_t n) {
  if (!S_ISREG(sb->st_mode)) {
    snprintf(why, n, "it is %s, not a regular file", kind_of(sb->st_mode));
    return LUDO_ELOAD;
  }
  if ((unsigned long long)sb->st_size > LUDO__SRCFILE_MAX) {
    snprintf(why, n, "it has %lld bytes, more than the %zu MiB a source "
             "file may have", (long long)sb->st_size,
             LUDO__SRCFILE_MAX >> 20);
    return LUDO_ELOAD;
  }
  return 0;
}

/* Resolves root and path into rroot and rpath (PATH_MAX each). */
static int resolve(const char *root, const char *path, char *rroot,
                   char *rpath, char *why, size_t n) {
  if (realpath(path, rpath) == NULL) {
    if (errno == ENOENT || errno == ENOTDIR) return LUDO_ENOENT;
    snprintf(why, n, "%s", strerror(errno));
    return LUDO_ELOAD;
  }
  if (realpath(root, rroot) == NULL) {
    snprintf(why, n, "its folder %s: %s", root, strerror(errno));
    return LUDO_ELOAD;
  }
  if (!below(rroot, rpath)) {
    snprintf(why, n, "it leads outside %s (a symbolic link out of the "
             "folder)", root);
    return LUDO_ELOAD;
  }
  return 0;
}

int ludo__srcfile_open(const char *root, const char *path,
                       ludo__srcfile_t *f, char *why, size_t n) {
  char rroot[PATH_MAX], rpath[PATH_MAX];
  struct stat sb, fsb;
  int rc;
  f->fd = -1;
  f->size = 0;
  f->path = path;
  if ((rc = resolve(root, path, rroot, rpath, why, n)) != 0) return rc;
  if (lstat(rpath, &sb) != 0) return LUDO_ENOENT;
  if ((rc = check_stat(&sb, why, n)) != 0) return rc;
  f->fd = open(rpath, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY |
                          O_CLOEXEC);
  if (f->fd < 0) {
    snprintf(why, n, "cannot open it: %s", strerror(errno));
    return LUDO_ELOAD;
  }
  if (fstat(f->fd, &fsb) != 0 || fsb.st_dev != sb.st_dev ||
      fsb.st_ino != sb.st_ino) {
    snprintf(why, n, "it changed while it was opened");
    rc = LUDO_ELOAD;
  } else {
    rc = check_stat(&fsb, why, n);
  }
  if (rc != 0) {
    ludo__srcfile_close(f);
    return rc;
  }
  f->size = (size_t)fsb.st_size;
  return 0;
}

void ludo__srcfile_push(lua_State *L, ludo__srcfile_t *f) {
  luaL_Buffer b;
  char *p = luaL_buffinitsize(L, &b, f->size);
  size_t got = 0;
  while (got < f->size) {
    ssize_t k = read(f->fd, p + got, f->size - got);
    if (k == 0) break; /* shorter than when it was opened */
    if (k < 0 && errno == EINTR) continue;
    if (k < 0)
      ludo__error_raise(L, LUDO_ELOAD, "reading %s: %s", f->path,
                        strerror(errno));
    got += (size_t)k;
  }
  luaL_pushresultsize(&b, got);
}

void ludo__srcfile_close(ludo__srcfile_t *f) {
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
}
