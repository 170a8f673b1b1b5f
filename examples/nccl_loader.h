/*
 * nccl_loader.h — NCCL opened at run time with dlopen, the way
 * libmetrale_gpu opens the NVIDIA driver: nothing links libnccl, so a
 * program built with this header runs (and says NCCL is absent) anywhere.
 *
 * Where it looks, in order:
 *   1. $METRALE_NCCL_LIB: a path to libnccl.so.2, or a folder holding it
 *      (when set, nothing else is tried);
 *   2. "libnccl.so.2" in the dynamic loader's default path;
 *   3. <dir>/nvidia/nccl/lib/libnccl.so.2 for every site-packages folder
 *      python3 names (the pip package nvidia-nccl-cu13 puts it there).
 *
 * NVLink multicast stays off: nccl_load sets NCCL_NVLS_ENABLE=0 (overwriting
 * any value) before NCCL is loaded, and the variable stays set, so it is
 * inherited by any child process too. A program that uses multicast
 * (cuMulticastCreate, NCCL's NVLS algorithms) can put a host's shared GPUs
 * out of service; nothing here calls it.
 *
 * Only the handful of NCCL types and entry points the examples use are
 * declared here (NCCL 2.x ABI, from nccl.h), so nccl.h is not needed.
 */
#ifndef METRALE_NCCL_LOADER_H
#define METRALE_NCCL_LOADER_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ncclComm* ncclComm_t;
typedef struct {
  char internal[128]; /* NCCL_UNIQUE_ID_BYTES */
} ncclUniqueId;
typedef int ncclResult_t; /* ncclSuccess = 0 */
#define METRALE_NCCL_FLOAT32 7 /* ncclFloat32 */
#define METRALE_NCCL_SUM 0     /* ncclSum */

typedef struct nccl_api {
  void* lib;
  char path[4096];
  ncclResult_t (*GetVersion)(int* version);
  ncclResult_t (*GetUniqueId)(ncclUniqueId* id);
  ncclResult_t (*CommInitRank)(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
  ncclResult_t (*CommDestroy)(ncclComm_t comm);
  ncclResult_t (*AllReduce)(const void* send, void* recv, size_t count, int datatype, int op,
                            ncclComm_t comm, void* stream);
  const char* (*GetErrorString)(ncclResult_t result);
} nccl_api_t;

static void* nccl_try_open(const char* path, char* why, size_t whylen) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL && why != NULL && whylen > 0) {
    const char* e = dlerror();
    snprintf(why, whylen, "%s", e != NULL ? e : "dlopen failed");
  }
  return lib;
}

/* Each site-packages folder python3 knows, one per line, into buf. */
static int nccl_python_dirs(char* buf, size_t len) {
  FILE* p = popen(
      "python3 -c \"import site,sys; d=[]\n"
      "try: d+=site.getsitepackages()\nexcept Exception: pass\n"
      "try: d.append(site.getusersitepackages())\nexcept Exception: pass\n"
      "print('\\n'.join(d+sys.path))\" 2>/dev/null",
      "r");
  if (p == NULL) return 0;
  size_t n = fread(buf, 1, len - 1, p);
  buf[n] = '\0';
  pclose(p);
  return n > 0;
}

/* 0 when NCCL is loaded (api->path says from where); 1 with why filled. */
static int nccl_load(nccl_api_t* api, char* why, size_t whylen) {
  memset(api, 0, sizeof *api);
  setenv("NCCL_NVLS_ENABLE", "0", 1); /* before NCCL reads its environment */
  char first_why[512] = "";
  const char* env = getenv("METRALE_NCCL_LIB");
  if (env != NULL && *env != '\0') {
    snprintf(api->path, sizeof api->path, "%s", env);
    api->lib = nccl_try_open(api->path, first_why, sizeof first_why);
    if (api->lib == NULL) {
      snprintf(api->path, sizeof api->path, "%s/libnccl.so.2", env);
      api->lib = nccl_try_open(api->path, NULL, 0);
    }
    if (api->lib == NULL) {
      snprintf(why, whylen, "METRALE_NCCL_LIB=%s: %s", env, first_why);
      return 1;
    }
  }
  if (api->lib == NULL) {
    snprintf(api->path, sizeof api->path, "libnccl.so.2");
    api->lib = nccl_try_open(api->path, first_why, sizeof first_why);
  }
  if (api->lib == NULL) {
    static char dirs[16384];
    if (nccl_python_dirs(dirs, sizeof dirs)) {
      for (char* line = strtok(dirs, "\n"); line != NULL && api->lib == NULL;
           line = strtok(NULL, "\n")) {
        if (*line == '\0') continue;
        snprintf(api->path, sizeof api->path, "%s/nvidia/nccl/lib/libnccl.so.2", line);
        api->lib = nccl_try_open(api->path, NULL, 0);
      }
    }
  }
  if (api->lib == NULL) {
    snprintf(why, whylen,
             "libnccl.so.2 is not in the loader's path (%s) nor under nvidia/nccl/lib of any "
             "python3 site-packages (pip install nvidia-nccl-cu13), and METRALE_NCCL_LIB is unset",
             first_why);
    return 1;
  }
  struct {
    const char* name;
    void** slot;
  } syms[] = {
      {"ncclGetVersion", (void**)&api->GetVersion},
      {"ncclGetUniqueId", (void**)&api->GetUniqueId},
      {"ncclCommInitRank", (void**)&api->CommInitRank},
      {"ncclCommDestroy", (void**)&api->CommDestroy},
      {"ncclAllReduce", (void**)&api->AllReduce},
      {"ncclGetErrorString", (void**)&api->GetErrorString},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; ++i) {
    *syms[i].slot = dlsym(api->lib, syms[i].name);
    if (*syms[i].slot == NULL) {
      snprintf(why, whylen, "%s has no %s: not an NCCL 2 library", api->path, syms[i].name);
      return 1;
    }
  }
  return 0;
}

static const char* nccl_error(const nccl_api_t* api, ncclResult_t r) {
  return api->GetErrorString != NULL ? api->GetErrorString(r) : "?";
}

#endif /* METRALE_NCCL_LOADER_H */
