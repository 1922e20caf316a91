import sys,statistics as st
rows=[list(map(int,l.split())) for l in open(sys.argv[1])]
runs=[];cur=[];prev=None
for start,done,dr,pr,att,comp in rows:
    if prev is not None and start-prev>1e6: runs.append(cur); cur=[]
    cur.append(((done-start)/1e3,dr,pr)); prev=done
runs.append(cur)
a=[];b=[]
for r in runs:
    dec=[us for us,dr,pr in r if pr==0 and dr>0]
    if len(dec)<8: continue
    steady=st.median(dec[4:])
    a.append(st.mean(dec)); b.append(st.mean([steady]*4+dec[4:]))
print('runs',len(a),'mean of per-run decode step',round(st.mean(a),1),'with the first four at the run median',round(st.mean(b),1), 'ratio', round(st.mean(a)/st.mean(b),3))
