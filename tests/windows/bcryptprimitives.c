#include <windows.h>
#include <ntsecapi.h>
/* Wine 8 lacks ProcessPrng (bcryptprimitives.dll), which Rust's std calls for
   its random seeds; scripts/windows-check puts this stand-in in the Wine prefix. */
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG chunk = len > 0x10000 ? 0x10000 : (ULONG)len;
        if (!RtlGenRandom(data, chunk)) return FALSE;
        data += chunk; len -= chunk;
    }
    return TRUE;
}
