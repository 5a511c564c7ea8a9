import os, time, json, sys
seen = {}
out = sys.argv[1]
while True:
    for pid in os.listdir('/proc'):
        if not pid.isdigit(): continue
        try:
            cmd = open('/proc/%s/cmdline' % pid).read().split('\0')
        except OSError: continue
        if not any(c.endswith('dtn-migrate-transfer') for c in cmd) or 'serve' not in cmd: continue
        tot_cs = 0; tot_cpu = 0; nthr = 0
        try:
            for tid in os.listdir('/proc/%s/task' % pid):
                st = open('/proc/%s/task/%s/status' % (pid, tid)).read()
                for line in st.splitlines():
                    if line.startswith(('voluntary_ctxt', 'nonvoluntary_ctxt')):
                        tot_cs += int(line.split()[1])
                f = open('/proc/%s/task/%s/stat' % (pid, tid)).read().rsplit(')', 1)[1].split()
                tot_cpu += (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
                nthr += 1
        except OSError: continue
        low = '--no-receive-low-water' in cmd
        seen[pid] = dict(lowat=not low, cs=tot_cs, cpu=tot_cpu, threads=nthr)
    json.dump(seen, open(out, 'w'))
    time.sleep(0.5)
