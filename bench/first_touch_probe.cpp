// What a fresh mapping of shared memory costs on first touch, apart from the guest's page faults
// (issue 31's replay time). A memfd of 2 x 64 MiB is mapped with MAP_POPULATE and written twice;
// then mapped again (a second view, as a runner maps the arena) and a relu-like pass reads one
// half and writes the other three times. On a VM whose hypervisor keeps shadow page tables
// (this project's 2-core VMs) the first write and the first pass cost 20-40x the later ones with
// no guest page fault at all. Not built by CMake:
//   g++ -O2 -march=native bench/first_touch_probe.cpp -o /tmp/first_touch_probe && /tmp/first_touch_probe
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstring>
using C=std::chrono::steady_clock;
static double ms(C::time_point a){return std::chrono::duration<double,std::milli>(C::now()-a).count();}
static long flt(){rusage r; getrusage(RUSAGE_SELF,&r); return r.ru_minflt;}
int main(int argc,char**argv){
  size_t n=64<<20; int fd=memfd_create("x",0); ftruncate(fd,n*2);
  char* p=(char*)mmap(0,n*2,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_POPULATE,fd,0);
  auto t=C::now(); memset(p,1,n*2); printf("parent write %.1f ms\n",ms(t));
  t=C::now(); memset(p,2,n*2); printf("parent write2 %.1f ms\n",ms(t));
  int flags = MAP_SHARED | MAP_POPULATE;
  long f0=flt(); t=C::now(); char* in=(char*)mmap(0,n,PROT_READ,flags,fd,0); char* out=(char*)mmap(0,n,PROT_READ|PROT_WRITE,flags,fd,n); printf("child map %.1f ms faults %ld\n",ms(t),flt()-f0);
  for(int r=0;r<3;r++){ f0=flt(); t=C::now(); float* a=(float*)in; float* b=(float*)out; for(size_t i=0;i<n/4;i++) b[i]=a[i]>0?a[i]:0; printf("pass %d %.1f ms faults %ld\n",r,ms(t),flt()-f0); }
  f0=flt(); t=C::now(); volatile float s=0; float* a=(float*)in; for(size_t i=0;i<n/4;i+=1024) s+=a[i]; printf("read-only touch %.1f ms faults %ld\n",ms(t),flt()-f0);
}
