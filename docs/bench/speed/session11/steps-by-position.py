import sys,statistics as st
rows=[list(map(int,l.split())) for l in open(sys.argv[1])]
prev_done=None; since=0; recs=[]
for start,done,dr,pr,att,comp in rows:
    gap=(start-prev_done)/1e3 if prev_done else 1e9
    since = 0 if gap>1000 else since+1
    recs.append(dict(us=(done-start)/1e3,dr=dr,pr=pr,att=att,gap=gap,since=since))
    prev_done=done
d1=[r for r in recs if r['dr']==1 and r['pr']==0]
print('batch1 decode steps',len(d1),'mean us',round(st.mean(r['us'] for r in d1),1),'median',round(st.median(r['us'] for r in d1),1))
for lo,hi in [(0,64),(64,128),(128,192),(192,256),(256,320)]:
    x=[r['us'] for r in d1 if lo<=r['att']<hi]
    if x: print(f' pos {lo}-{hi}: n={len(x)} mean {st.mean(x):.1f} median {st.median(x):.1f}')
for lo,hi in [(0,1),(1,2),(2,5),(5,20),(20,100000)]:
    x=[r['us'] for r in d1 if lo<=r['since']<hi]
    if x: print(f' steps since idle {lo}-{hi}: n={len(x)} mean {st.mean(x):.1f} median {st.median(x):.1f}')
g=[r['gap'] for r in d1 if r['since']>0]
print('gap between steps (us, not idle): mean',round(st.mean(g),1),'median',round(st.median(g),1))
dk=[r for r in recs if r['pr']==0]
for b in (1,2,3,4):
    x=[r['us'] for r in dk if r['dr']==b]
    if x: print(' decode batch',b,len(x),round(st.mean(x),1))
p=[r for r in recs if r['pr']>0]
print('prefill steps',len(p),'mean us',round(st.mean(r['us'] for r in p),1),'with decode rows',sum(1 for r in p if r['dr']>0), 'their total ms', round(sum(r['us'] for r in p if r['dr']>0)/1e3,1))
