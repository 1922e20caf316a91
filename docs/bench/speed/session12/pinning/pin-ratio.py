import json,re,sys,statistics as st
d=sys.argv[1]; n=int(sys.argv[2])
for mode in (sys.argv[3].split() if len(sys.argv)>3 else ['none','lo','hi']):
    rs=[]
    for i in range(1,n+1):
        step=float(re.search(r'real_time\s+(\d+) us',open(f'{d}/step-run{i}.txt').read()).group(1))
        j=json.load(open(f'{d}/r5-{mode}-run{i}.json'))['runs'][0]; t=j['tpot_s']['mean']*1e6
        m=open(f'{d}/r5-{mode}-run{i}.metrics').read()
        ds=float(re.search(r'conveyor_step_time_seconds_sum\{kind="decode"\} (\S+)',m).group(1)); dc=float(re.search(r'conveyor_step_time_seconds_count\{kind="decode"\} (\S+)',m).group(1))
        rs.append(t/step); print(f'{mode} run {i}: step {step:.0f} TPOT {t:.0f} ratio {t/step:.3f} pass {ds/dc*1e6:.0f}')
    print(mode, 'median', round(st.median(rs),3))
