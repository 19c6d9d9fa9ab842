/* hostlib.c - finding and loading an environment's host library (see
 * cli.h and ludo.h, "host libraries"): the environment's manifest or
 * --host-lib names a shared object; it is dlopen'ed once and its
 * ludo_host_init called on each runtime that runs the environment. */
#include <dlfcn.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

/* The manifest's file name in an environment's folder. */
#define MANIFEST "manifest.json"

static int is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Reads the manifest at `file`: its host_lib into lib (empty when it names
 * none). Returns 0, or -1 after printing what is wrong with it. */
static int read_manifest(const char *file, char *lib, size_t n) {
  json_error_t jerr;
  json_t *root = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr), *v;
  const char *key;
  int rc = 0;
  lib[0] = '\0';
  if (root == NULL) {
    ludo__cli_error("%s: not valid JSON: %s (line %d, column %d)", file,
                    jerr.text, jerr.line, jerr.column);
    return -1;
  }
  if (!json_is_object(root)) {
    ludo__cli_error("%s: expected a JSON object, as in "
                    "{\"host_lib\": \"mylib.so\"}", file);
    json_decref(root);
    return -1;
  }
  json_object_foreach(root, key, v) {
    if (strcmp(key, "host_lib") != 0) {
      ludo__cli_error("%s: unknown field '%s' (known: host_lib)", file,
                      key);
      rc = -1;
      break;
    }
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        json_string_length(v) >= n ||
        strlen(json_string_value(v)) != json_string_length(v)) {
      ludo__cli_error("%s: host_lib must be a non-empty file name or path "
                      "(shorter than %zu bytes)", file, n);
      rc = -1;
      break;
    }
    snprintf(lib, n, "%s", json_string_value(v));
  }
  json_decref(root);
  return rc;
}

/* Sets h->path to the real path of `file`. Returns 0, or -1 when it is
 * not a file. */
static int set_path(ludo__cli_hostlib_t *h, const char *file) {
  char real[PATH_MAX];
  if (!is_file(file) || realpath(file, real) == NULL) return -1;
  snprintf(h->path, sizeof h->path, "%s", real);
  return 0;
}

/* Finds the library a manifest in folder `dir` names: a path (with a '/')
 * relative to `dir`, or a bare file name looked up in `dir` and then next
 * to the ludo binary (build/ in a build tree). */
static int resolve(ludo__cli_hostlib_t *h, const char *dir, const char *lib) {
  char file[8400];
  const char *exe;
  if (lib[0] == '/') {
    snprintf(file, sizeof file, "%s", lib);
    if (set_path(h, file) == 0) return 0;
    ludo__cli_error("host library %s (named by %s): no such file", lib,
                    h->origin);
    return -1;
  }
  snprintf(file, sizeof file, "%s/%s", dir, lib);
  if (set_path(h, file) == 0) return 0;
  if (strchr(lib, '/') != NULL) {
    ludo__cli_error("host library %s (named by %s): no such file", file,
                    h->origin);
    return -1;
  }
  exe = ludo__cli_exe_dir();
  if (exe != NULL) {
    snprintf(file, sizeof file, "%s/%s", exe, lib);
    if (set_path(h, file) == 0) return 0;
  }
  ludo__cli_error("host library %s (named by %s): no such file in %s/%s%s "
                  "(build it, or give one with --host-lib PATH)", lib,
                  h->origin, dir, exe ? " nor in " : "", exe ? exe : "");
  return -1;
}

/* dlopens h->path and finds its ludo_host_init. */
static int load(ludo__cli_hostlib_t *h) {
  void *sym;
  h->handle = dlopen(h->path, RTLD_NOW | RTLD_LOCAL);
  if (h->handle == NULL) {
    const char *why = dlerror();
    ludo__cli_error("host library %s (named by %s): cannot load it: %s",
                    h->path, h->origin, why ? why : "unknown error");
    return -1;
  }
  dlerror();
  sym = dlsym(h->handle, LUDO_HOST_INIT_SYMBOL);
  if (sym == NULL) {
    ludo__cli_error("host library %s (named by %s) does not export %s "
                    "(int " LUDO_HOST_INIT_SYMBOL "(ludo_runtime_t *, "
                    "char *, size_t), declared in ludo.h)", h->path,
                    h->origin, LUDO_HOST_INIT_SYMBOL);
    dlclose(h->handle);
    h->handle = NULL;
    return -1;
  }
  memcpy(&h->init, &sym, sizeof h->init); /* POSIX: data to function */
  return 0;
}

int ludo__cli_hostlib_open(ludo__cli_hostlib_t *h, const char *env_path,
                           const char *override, int disabled) {
  char dir[4096], manifest[4200], lib[4096];
  size_t n = strlen(env_path);
  memset(h, 0, sizeof *h);
  if (override != NULL) {
    snprintf(h->origin, sizeof h->origin, "--host-lib");
    if (set_path(h, override) != 0) {
      ludo__cli_error("host library %s (--host-lib): no such file",
                      override);
      return -1;
    }
    return load(h);
  }
  while (n > 1 && env_path[n - 1] == '/') n--;
  if (n >= sizeof dir) return 0; /* ludo_env_load reports the path */
  memcpy(dir, env_path, n);
  dir[n] = '\0';
  if (!is_dir(dir)) return 0;    /* a .lua file has no manifest */
  snprintf(manifest, sizeof manifest, "%s/" MANIFEST, dir);
  if (!is_file(manifest)) return 0;
  if (read_manifest(manifest, lib, sizeof lib) != 0) return -1;
  if (lib[0] == '\0') return 0;
  if (disabled) {
    ludo__cli_error("%s names the host library %s, and --no-host-lib "
                    "forbids loading native code", manifest, lib);
    return -1;
  }
  snprintf(h->origin, sizeof h->origin, "%s", manifest);
  if (resolve(h, dir, lib) != 0) return -1;
  return load(h);
}

int ludo__cli_hostlib_init(ludo__cli_hostlib_t *h, ludo_runtime_t *rt) {
  char err[1024];
  int rc;
  if (h->handle == NULL) return 0;
  err[0] = '\0';
  rc = h->init(rt, err, sizeof err);
  if (rc == 0) return 0;
  err[sizeof err - 1] = '\0';
  ludo__cli_error("host library %s: " LUDO_HOST_INIT_SYMBOL " failed with "
                  "%s (%d): %s", h->path, ludo_err_name(rc), rc,
                  err[0] ? err
                  : ludo_runtime_errmsg(rt)[0] ? ludo_runtime_errmsg(rt)
                                               : ludo_strerror(rc));
  return -1;
}

void ludo__cli_hostlib_close(ludo__cli_hostlib_t *h) {
  if (h->handle != NULL) dlclose(h->handle);
  h->handle = NULL;
  h->init = NULL;
}
