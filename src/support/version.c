/* The library's version at run time (tgc/tgc.h), from the same macros the header gives the
 * caller, so a program can compare the two (CMakeLists.txt checks the macros against the
 * project's version when it configures). */
#include "tgc/tgc.h"

#define TGC_STR_(x) #x
#define TGC_STR(x)  TGC_STR_(x)

const char *tgc_version(void)
{
    return TGC_STR(TGC_VERSION_MAJOR) "." TGC_STR(TGC_VERSION_MINOR) "." TGC_STR(TGC_VERSION_PATCH);
}

int tgc_version_number(void)
{
    return TGC_VERSION_NUMBER;
}
