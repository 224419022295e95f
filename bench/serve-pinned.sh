# Sourced by bench/serve-perfstat.sh and bench/serve-perfrecord.sh: start
# `$quill serve` on a fresh directory and a free local port, on CPU 1
# (SERVER_PIN; "" for none; SERVE_ARGS adds flags), wait until it
# listens, and prepare a 10,000-row sysbench table for $test. Sets spid
# (the server's pid), sb (sysbench's connection flags) and cpin (the
# client's pin, CLIENT_PIN, CPU 0 by default); stops the server and
# removes the directory on exit. Needs quill, out and test set.
spin=${SERVER_PIN-taskset -c 1}; cpin=${CLIENT_PIN-taskset -c 0}
mkdir -p "$out"
ulimit -n 8192
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# shellcheck disable=SC2086 # SERVE_ARGS is a list of flags
$spin "$quill" serve --dir "$dir/data" --listen "127.0.0.1:$port" ${SERVE_ARGS:-} > "$out/server.log" 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null || true; sleep 1; rm -rf "$dir"' EXIT
for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
sb=(--db-driver=pgsql --pgsql-host=127.0.0.1 --pgsql-port="$port" --pgsql-user=sbtest
    --pgsql-db=sbtest --tables=1 --table-size=10000)
sysbench "$test" "${sb[@]}" prepare > /dev/null
