/* eval_digest.c - what a run's code is, for run.json (see eval.h): a
 * 64-bit FNV-1a digest of a Lua policy file, or of an environment's
 * folder (every regular file under it, in name order, each with its
 * relative name), so that --resume and merge refuse code that changed at
 * the same path. It tells edits apart; it is not meant to resist someone
 * forging a collision. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/eval.h"

/* Bounds, so a folder named by mistake (a home directory) ends quickly. */
#define MAX_DEPTH 8
#define MAX_FILES 10000
#define MAX_BYTES (256u << 20)

typedef struct {
  uint64_t h;
  size_t files, bytes;
} digest_t;

static void mix(digest_t *d, const void *p, size_t n) {
  const unsigned char *b = p;
  size_t i;
  for (i = 0; i < n; i++) {
    d->h ^= b[i];
    d->h *= 1099511628211ULL;
  }
}

static int add_file(digest_t *d, const char *path) {
  char buf[65536];
  size_t got;
  FILE *f = fopen(path, "rb");
  if (f == NULL) return -1;
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
    if ((d->bytes += got) > MAX_BYTES) break;
    mix(d, buf, got);
  }
  fclose(f);
  return d->bytes > MAX_BYTES || ++d->files > MAX_FILES ? -1 : 0;
}

/* Skips "." and "..", and hidden entries (.git and the like). */
static int visible(const struct dirent *e) { return e->d_name[0] != '.'; }

static int add_dir(digest_t *d, const char *dir, const char *rel,
                   int depth) {
  struct dirent **names;
  int n, i, rc = 0;
  if (depth > MAX_DEPTH) return -1;
  if ((n = scandir(dir, &names, visible, alphasort)) < 0) return -1;
  for (i = 0; i < n; i++) {
    char path[4096], sub[4096];
    struct stat st;
    if (rc == 0 &&
        (size_t)snprintf(path, sizeof path, "%s/%s", dir,
                         names[i]->d_name) < sizeof path &&
        (size_t)snprintf(sub, sizeof sub, "%s%s/", rel, names[i]->d_name) <
            sizeof sub &&
        stat(path, &st) == 0) {
      mix(d, sub, strlen(sub) + 1); /* the name, then what it holds */
      if (S_ISDIR(st.st_mode))
        rc = add_dir(d, path, sub, depth + 1);
      else if (S_ISREG(st.st_mode))
        rc = add_file(d, path);
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

int eval_digest(const char *path, char out[EVAL_DIGEST_LEN]) {
  digest_t d = {14695981039346656037ULL, 0, 0};
  struct stat st;
  int rc;
  if (stat(path, &st) != 0) return -1;
  rc = S_ISDIR(st.st_mode) ? add_dir(&d, path, "", 0) : add_file(&d, path);
  if (rc != 0) return -1;
  snprintf(out, EVAL_DIGEST_LEN, "fnv1a64:%016llx", (unsigned long long)d.h);
  return 0;
}
