/* Where a padded pooled alloc+free pair's time goes (issue 10's red-zone
 * goal): 200k pairs of one size with 1k other 256 B blocks live, each pair
 * timed with clock_gettime, three rounds. A pair slower than 1.5 µs is one
 * that ran a batch check of freed pads (every METRALE_REDZONE_VERIFY_BATCH
 * frees, or sooner for large blocks: METRALE_REDZONE_VERIFY_BYTES), so
 * "fast mean" is a pair's own bookkeeping (with the clock's cost; compare
 * redzone 0) and "slow ... ns/pair of total" the checks' share.
 *   cc -O2 -Iinclude bench/profile/redzone_pairs.c -Lbuild -lmetrale_gpu \
 *      -Wl,-rpath,$PWD/build -o /tmp/redzone_pairs
 *   /tmp/redzone_pairs [redzone_bytes=64] [bytes=256] [backend: 1 cuda, 2 host]
 * Figures of one run are in bench/results/2026-12-06-r16-nvidia-h100.md. */
#include <metrale_gpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static inline double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  size_t rz = argc>1? atoi(argv[1]):64; size_t sz = argc>2? strtoull(argv[2],0,0):256;
  int backend = argc>3 ? atoi(argv[3]) : 1;
  metrale_context_options_t o; metrale_context_options_init(&o);
  o.backend = backend==1? METRALE_BACKEND_CUDA : METRALE_BACKEND_HOST; o.pool=1; o.redzone_bytes=rz;
  metrale_context_t*c; if(metrale_context_create(&o,&c)){printf("%s\n",metrale_last_error_message());return 1;}
  static metrale_devptr_t live[1000]; for(int i=0;i<1000;i++) metrale_alloc(c,256,&live[i]);
  enum{N=200000}; static double t[N];
  for(int rep=0;rep<3;rep++){
    double t0=now();
    for(int i=0;i<N;i++){double a=now(); metrale_devptr_t d; if(metrale_alloc(c,sz,&d)){printf("fail %s\n",metrale_last_error_message());return 1;} double b=now(); metrale_free(c,d); double e=now(); t[i]=(e-a); (void)b;}
    double tot=now()-t0;
    double sum=0,slow=0; int ns=0; for(int i=0;i<N;i++){sum+=t[i]; if(t[i]>1500){slow+=t[i];ns++;}}
    qsort(t,N,sizeof t[0],cmp);
    printf("rz=%zu sz=%zu: %.1f ns/pair overall; timed pairs mean %.1f median %.1f p90 %.1f p99 %.1f; slow(>1.5us) %d pairs, mean %.0f ns, %.1f ns/pair of total; fast mean %.1f\n",
      rz,sz,tot/N,sum/N,t[N/2],t[N*9/10],t[N*99/100],ns,ns?slow/ns:0,slow/N,(sum-slow)/(N-ns));
  }
  metrale_pool_stats_t st; st.struct_size=sizeof st;
  if(metrale_pool_stats(c,&st)==0) printf("stats: fills %llu skipped %llu checks %llu checked %llu\n",(unsigned long long)st.pad_fills,(unsigned long long)st.pad_fills_skipped,(unsigned long long)st.pad_checks,(unsigned long long)st.pads_checked);
  for(int i=0;i<1000;i++) metrale_free(c,live[i]);
  metrale_context_destroy(c); return 0;}
