#!/usr/bin/env bash
# Installs PostgreSQL from Debian if missing, starts a cluster and creates the `stratus` role and
# database that the PostgreSQL suite uses. Idempotent; needs root (as CI and developers are here).
set -euo pipefail
port="${STRATUS_PG_PORT:-5432}"

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  echo "installing PostgreSQL"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q postgresql
fi

version="$(ls /usr/lib/postgresql | sort -V | tail -n 1)"
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -q "^${version} main$"; then
  pg_createcluster "$version" main --port "$port"
fi
cluster_status="$(pg_lsclusters -h | awk -v v="$version" '$1==v && $2=="main" {print $4}')"
if [ "$cluster_status" != "online" ]; then
  pg_ctlcluster "$version" main start
fi
cluster_port="$(pg_lsclusters -h | awk -v v="$version" '$1==v && $2=="main" {print $3}')"
if [ "$cluster_port" != "$port" ]; then
  echo "the PostgreSQL $version cluster listens on $cluster_port, not $port; set STRATUS_PG_PORT=$cluster_port" >&2
  exit 1
fi

for _ in $(seq 1 30); do
  runuser -u postgres -- pg_isready -q -p "$port" && break
  sleep 1
done

runuser -u postgres -- psql -q -p "$port" -v ON_ERROR_STOP=1 <<'SQL'
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'stratus') THEN
    CREATE ROLE stratus LOGIN PASSWORD 'stratus';
  END IF;
END $$;
SQL
if ! runuser -u postgres -- psql -p "$port" -tAc "SELECT 1 FROM pg_database WHERE datname = 'stratus'" | grep -q 1; then
  runuser -u postgres -- createdb -p "$port" -O stratus stratus
fi
echo "PostgreSQL $version ready on 127.0.0.1:$port (database stratus, role stratus)"
