import json,re,sys,statistics as st
d=sys.argv[1]; n=int(sys.argv[2]); delays=sys.argv[3].split() if len(sys.argv)>3 else ['2','0']
for dl in delays:
    rs=[]
    for i in range(1,n+1):
        step=float(re.search(r'real_time\s+(\d+) us',open(f'{d}/r5-step-run{i}.txt').read()).group(1))
        j=json.load(open(f'{d}/r5-delay{dl}-run{i}.json'))['runs'][0]
        t=j['tpot_s']['mean']*1e6
        itl=j.get('itl_s',{}); 
        m=open(f'{d}/r5-delay{dl}-run{i}.metrics').read()
        ds=float(re.search(r'conveyor_step_time_seconds_sum\{kind="decode"\} (\S+)',m).group(1)); dc=float(re.search(r'conveyor_step_time_seconds_count\{kind="decode"\} (\S+)',m).group(1))
        rs.append(t/step); print(f'delay {dl} run {i}: step {step:.0f} us, TPOT {t:.1f} us, ratio {t/step:.3f}, pass {ds/dc*1e6:.0f} us, itl p99 {itl.get("p99",0)*1e3:.2f} ms, ttft mean {j["ttft_s"]["mean"]*1e3:.1f} ms')
    print(f'delay {dl}: median {st.median(rs):.3f}, range {min(rs):.3f} to {max(rs):.3f}')
