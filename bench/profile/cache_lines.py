#!/usr/bin/env python3
"""D1 misses per call, by instruction, of libmetrale_gpu in a callgrind
output made with --cache-sim=yes --dump-instr=yes (launch_lines.sh).
Prints the total over instructions that miss at least once every four
calls, and the rows outside the host backend with their source lines.
Usage: cache_lines.py CALLGRIND_OUT CALLS LIBRARY"""
import re,subprocess,collections,sys
f=sys.argv[1]; n=int(sys.argv[2]); so=sys.argv[3]
lines=open(f).read().split('\n')
ev=None; obmap={}; cur_ob=None; last_addr=0; skip=False
res=collections.Counter()
for l in lines:
    if l.startswith('events:'): ev=l.split()[1:]; continue
    m=re.match(r'^ob=\((\d+)\)(?: (.*))?$',l)
    if m:
        if m.group(2): obmap[m.group(1)]=m.group(2)
        cur_ob=obmap.get(m.group(1)); continue
    if l.startswith('calls='): skip=True; continue
    if l.startswith(('fl=','fi=','fe=','fn=','cob=','cfi=','cfl=','cfn=')): continue
    if re.match(r'^(0x[0-9a-f]+|\+\d+|-\d+|\*)',l):
        parts=l.split(); a=parts[0]
        if a.startswith('0x'): addr=int(a,16)
        elif a.startswith('+'): addr=last_addr+int(a[1:])
        elif a.startswith('-'): addr=last_addr-int(a[1:])
        else: addr=last_addr
        last_addr=addr
        if skip: skip=False; continue
        evs=parts[2:]
        d={e:(int(evs[i]) if i<len(evs) and evs[i].isdigit() else 0) for i,e in enumerate(ev)}
        if cur_ob and 'libmetrale' in cur_ob:
            res[addr]+=d.get('D1mr',0)+d.get('D1mw',0)
def loc(a):
    out=subprocess.run(['addr2line','-i','-f','-C','-e',so,hex(a)],capture_output=True,text=True).stdout.strip().split('\n')
    frames=[out[i+1].split('/')[-1]+':'+out[i].split('(')[0][-40:] for i in range(0,len(out)-1,2)]
    return ' <- '.join(frames[:3]), ' '.join(out)
core=0; tot=0
rows=[]
for a,c in res.most_common():
    if c < n/4: break
    L,full=loc(a); tot+=c
    isbk='backend/host' in full or 'host::' in full
    if not isbk: core+=c
    rows.append((c/n,hex(a),L,isbk))
print(f"lib D1 misses/call (>=1/4 per launch rows): {tot/n:.2f}; outside the host backend: {core/n:.2f}")
for r in rows:
    if not r[3]: print(f"{r[0]:5.2f} {r[1]} {r[2][:200]}")
