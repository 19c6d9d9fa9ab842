/* eval_digest.c - what a run's code is, for run.json (see eval.h): a
 * 64-bit FNV-1a digest of an environment's folder (every regular file
 * under it, in name order, each with its relative name), or of a
 * policy's Lua files (every *.lua file under the folder of the file
 * that defines the policy: what its require can load), so that --resume
 * and merge refuse code that changed at the same path. It tells edits
 * apart; it is not meant to resist someone forging a collision. */
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
#define MAX_ENTRIES 200000

typedef struct {
  uint64_t h;
  size_t files, bytes, entries;
  int lua_only;            /* *.lua files only; an eval output folder,
                              or one that cannot be read, is skipped */
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

static int is_lua(const char *name) {
  size_t n = strlen(name);
  return n > 4 && strcmp(name + n - 4, ".lua") == 0;
}

/* An output folder of ludo eval (its lock and run.json): it holds no
 * module, and its trajectories may be a million files, so a policy next
 * to its run's output is not slowed down by it. */
static int is_eval_out(const char *dir) {
  char p[4200];
  struct stat st;
  snprintf(p, sizeof p, "%s/" EVAL_LOCK, dir);
  if (stat(p, &st) != 0) return 0;
  snprintf(p, sizeof p, "%s/run.json", dir);
  return stat(p, &st) == 0;
}

static int add_dir(digest_t *d, const char *dir, const char *rel,
                   int depth);

/* What a folder entry adds: its relative name, then what it holds (a
 * file's bytes, a folder's entries). With lua_only, a Lua file's name and
 * bytes alone: a folder adds only the Lua files under it, so an empty one
 * made next to the policy (an --out's parent) changes nothing. */
static int add_entry(digest_t *d, const char *path, const char *name,
                     const char *sub, int depth) {
  struct stat st;
  if (stat(path, &st) != 0) return 0;
  if (d->lua_only) {
    if (S_ISDIR(st.st_mode))
      return is_eval_out(path) ? 0 : add_dir(d, path, sub, depth + 1);
    if (!S_ISREG(st.st_mode) || !is_lua(name)) return 0;
  }
  mix(d, sub, strlen(sub) + 1);
  if (S_ISDIR(st.st_mode)) return add_dir(d, path, sub, depth + 1);
  return S_ISREG(st.st_mode) ? add_file(d, path) : 0;
}

static int add_dir(digest_t *d, const char *dir, const char *rel,
                   int depth) {
  struct dirent **names;
  int n, i, rc = 0;
  if (depth > MAX_DEPTH) return d->lua_only ? 0 : -1;
  if ((n = scandir(dir, &names, visible, alphasort)) < 0)
    return d->lua_only && depth > 0 ? 0 : -1; /* no module there */
  if ((d->entries += (size_t)n) > MAX_ENTRIES) rc = -1;
  for (i = 0; i < n; i++) {
    char path[4096], sub[4096];
    if (rc == 0 &&
        (size_t)snprintf(path, sizeof path, "%s/%s", dir,
                         names[i]->d_name) < sizeof path &&
        (size_t)snprintf(sub, sizeof sub, "%s%s/", rel, names[i]->d_name) <
            sizeof sub)
      rc = add_entry(d, path, names[i]->d_name, sub, depth);
    free(names[i]);
  }
  free(names);
  return rc;
}

static void digest_text(const digest_t *d, char out[EVAL_DIGEST_LEN]) {
  snprintf(out, EVAL_DIGEST_LEN, "fnv1a64:%016llx", (unsigned long long)d->h);
}

int eval_digest(const char *path, char out[EVAL_DIGEST_LEN]) {
  digest_t d = {14695981039346656037ULL, 0, 0, 0, 0};
  struct stat st;
  int rc;
  if (stat(path, &st) != 0) return -1;
  rc = S_ISDIR(st.st_mode) ? add_dir(&d, path, "", 0) : add_file(&d, path);
  if (rc != 0) return -1;
  digest_text(&d, out);
  return 0;
}

int eval_digest_lua(const char *dir, char out[EVAL_DIGEST_LEN]) {
  digest_t d = {14695981039346656037ULL, 0, 0, 0, 1};
  if (add_dir(&d, dir, "", 0) != 0) return -1;
  digest_text(&d, out);
  return 0;
}
