/* tgc_dir_ensure: mkdir -p with a reason when it fails. */
#include "support/dirs.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "support/log.h"

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Creates path and its parents; 0 on success, else the errno of the step that failed and
 * that step's path in failed. */
static int make_dirs(const char *dir, char *failed, size_t n)
{
    char path[4096];
    size_t len = strlen(dir);
    if (len >= sizeof path) {
        snprintf(failed, n, "%.64s...", dir);
        return ENAMETOOLONG;
    }
    memcpy(path, dir, len + 1);
    while (len > 1 && path[len - 1] == '/')
        path[--len] = '\0';
    for (char *p = path + 1;; p++) {
        int last = *p == '\0';
        if (!last && *p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            snprintf(failed, n, "%s", path);
            return errno;
        }
        if (!is_dir(path)) {
            snprintf(failed, n, "%s", path);
            return ENOTDIR;
        }
        if (last)
            return 0;
        *p = '/';
    }
}

/* Directories already warned about (a hash each), so a failing one is named once. */
static pthread_mutex_t g_warn_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_warned[64];
static int g_n_warned;

static int first_warning(const char *dir)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *c = dir; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    int first = 1;
    pthread_mutex_lock(&g_warn_lock);
    for (int i = 0; i < g_n_warned && first; i++)
        first = g_warned[i] != h;
    if (first && g_n_warned < (int)(sizeof g_warned / sizeof g_warned[0]))
        g_warned[g_n_warned++] = h;
    pthread_mutex_unlock(&g_warn_lock);
    return first;
}

int tgc_dir_ensure(const tgc_config *cfg, const char *dir, const char *what,
                   const char *consequence)
{
    if (!dir || !*dir)
        return 0;
    if (is_dir(dir))
        return 1;
    char failed[4096];
    int err = make_dirs(dir, failed, sizeof failed);
    if (!err)
        return 1;
    if (first_warning(dir)) {
        char why[256];
        if (strcmp(failed, dir) == 0)
            snprintf(why, sizeof why, "%s", strerror(err));
        else
            snprintf(why, sizeof why, "%.160s: %s", failed, strerror(err));
        tgc_log_msg(cfg, 0, "tgc: %s '%s' is not a directory and cannot be created (%s); %s", what,
                    dir, why, consequence);
    }
    return 0;
}
