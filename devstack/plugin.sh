#!/bin/bash
# DevStack plugin of dtn-migrate: the REST API under uwsgi (dtn-api), the
# migration engine (dtn-engine) and, on the nodes that are DTNs, the DTN
# agent (dtn-agent).  devstack/settings sets the variables used here;
# devstack/README.rst tells how to enable it.
#
# DevStack sources this file with its own functions already loaded
# (iniset, run_process, get_or_create_service, ...), which shellcheck
# cannot see; it does not need to (it checks the calls, not that the
# functions exist).
# shellcheck shell=bash

DTN_MIGRATE_BIN_DIR=$(get_python_exec_prefix)

function dtn_migrate_api_url {
    if [[ -n "$DTN_MIGRATE_API_PORT" ]]; then
        echo "$DTN_MIGRATE_SERVICE_PROTOCOL://$DTN_MIGRATE_SERVICE_HOST:$DTN_MIGRATE_API_PORT"
    else
        echo "$DTN_MIGRATE_SERVICE_PROTOCOL://$DTN_MIGRATE_SERVICE_HOST$DTN_MIGRATE_API_PATH"
    fi
}

function install_dtn_migrate {
    setup_develop "$DTN_MIGRATE_DIR"
    if is_service_enabled dtn-api; then
        install_apache_uwsgi
    fi
    if is_service_enabled dtn-agent; then
        # RDMA data plane when the node has a device; TCP otherwise.
        install_package python3-pyverbs || true
    fi
    if is_service_enabled dtn-engine; then
        install_dtn_migrate_jobboard
    fi
}

# The engines' coordination backend, on this node unless
# DTN_MIGRATE_JOBBOARD_HOSTS names others.
function install_dtn_migrate_jobboard {
    if [[ -n "$DTN_MIGRATE_JOBBOARD_HOSTS" ]]; then
        return
    fi
    case "$DTN_MIGRATE_JOBBOARD" in
        zookeeper)
            install_package zookeeperd
            start_service zookeeper
            ;;
        redis)
            install_package redis-server
            start_service redis-server
            ;;
    esac
}

# [task_flow] of the engines: the jobboard of DTN_MIGRATE_JOBBOARD, or
# none (one engine, the default of dtn-migrate itself).
function configure_dtn_migrate_jobboard {
    case "$DTN_MIGRATE_JOBBOARD" in
        none)
            if [[ "$DTN_MIGRATE_ENGINE_COUNT" -gt 1 ]]; then
                die "$LINENO" "DTN_MIGRATE_ENGINE_COUNT=$DTN_MIGRATE_ENGINE_COUNT" \
                    "needs a DTN_MIGRATE_JOBBOARD (zookeeper or redis)"
            fi
            return
            ;;
        zookeeper | redis) ;;
        *)
            die "$LINENO" "DTN_MIGRATE_JOBBOARD=$DTN_MIGRATE_JOBBOARD:" \
                "zookeeper, redis or none"
            ;;
    esac
    local hosts=${DTN_MIGRATE_JOBBOARD_HOSTS:-$SERVICE_HOST}
    iniset "$DTN_MIGRATE_CONF" task_flow jobboard_enabled True
    iniset "$DTN_MIGRATE_CONF" task_flow jobboard_backend_driver \
        "${DTN_MIGRATE_JOBBOARD}_taskflow_driver"
    iniset "$DTN_MIGRATE_CONF" task_flow jobboard_backend_hosts \
        "${hosts// /,}"
}

# The devstack service of engine N (1: dtn-engine; then dtn-engine-N).
function dtn_migrate_engine_service {
    if [[ "$1" -eq 1 ]]; then
        echo dtn-engine
    else
        echo "dtn-engine-$1"
    fi
}

# The [peer:<name>] sections from DTN_MIGRATE_PEERS, and [agent] peers.
function configure_dtn_migrate_peers {
    local names="" peer name addr port key project_id=""
    if [[ -n "$DTN_MIGRATE_IMPORT_PROJECT" ]]; then
        project_id=$(openstack --os-cloud devstack-system-admin project \
            show "$DTN_MIGRATE_IMPORT_PROJECT" -f value -c id)
    fi
    for peer in $DTN_MIGRATE_PEERS; do
        name=${peer%%=*}
        addr=${peer#*=}
        port=${addr##*:}
        [[ "$port" == "$addr" ]] && port=$DTN_MIGRATE_PORT
        addr=${addr%%:*}
        names="${names:+$names,}$name"
        key=$DTN_MIGRATE_CONF_DIR/$name.key
        if [[ ! -f "$key" ]]; then
            (umask 077 && openssl rand -hex 32 > "$key")
            echo "dtn-migrate: copy $key to the node of peer $name"
        fi
        iniset "$DTN_MIGRATE_CONF" "peer:$name" address "$addr"
        iniset "$DTN_MIGRATE_CONF" "peer:$name" port "$port"
        iniset "$DTN_MIGRATE_CONF" "peer:$name" key_file "$key"
        if dtn_migrate_tls; then
            iniset "$DTN_MIGRATE_CONF" "peer:$name" tls True
            iniset "$DTN_MIGRATE_CONF" "peer:$name" require_tls True
        fi
        # The images this peer sends land in that project.
        if [[ -n "$project_id" ]]; then
            iniset "$DTN_MIGRATE_CONF" "peer:$name" import_project \
                "$project_id"
        fi
    done
    iniset "$DTN_MIGRATE_CONF" agent peers "$names"
}

function dtn_migrate_tls {
    [[ "${DTN_MIGRATE_TLS,,}" =~ ^(true|yes|on|1)$ ]]
}

# [tls]: this DTN's certificate and key, self-signed and made when
# missing, and the bundle of the certificates it trusts, which starts
# with its own (the peers' are appended to it by hand, as their keys are
# copied).
function configure_dtn_migrate_tls {
    local names name san
    names="DNS:$(hostname)"
    for name in ${HOST_IP:-} $DTN_MIGRATE_TLS_NAMES; do
        if [[ "$name" =~ ^[0-9.]+$ || "$name" == *:* ]]; then
            names="$names,IP:$name"
        else
            names="$names,DNS:$name"
        fi
    done
    san="subjectAltName=$names"
    mkdir -p "$(dirname "$DTN_MIGRATE_TLS_CERT")" \
        "$(dirname "$DTN_MIGRATE_TLS_KEY")" "$(dirname "$DTN_MIGRATE_TLS_CA")"
    if [[ ! -f "$DTN_MIGRATE_TLS_CERT" || ! -f "$DTN_MIGRATE_TLS_KEY" ]]; then
        (umask 077 && openssl req -x509 -newkey ec \
            -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
            -subj "/CN=$(hostname)" -addext "$san" \
            -keyout "$DTN_MIGRATE_TLS_KEY" -out "$DTN_MIGRATE_TLS_CERT" \
            2>/dev/null)
        chmod 644 "$DTN_MIGRATE_TLS_CERT"
    fi
    if [[ ! -f "$DTN_MIGRATE_TLS_CA" ]]; then
        cp "$DTN_MIGRATE_TLS_CERT" "$DTN_MIGRATE_TLS_CA"
        echo "dtn-migrate: append $DTN_MIGRATE_TLS_CERT to" \
            "$DTN_MIGRATE_TLS_CA on the node of each peer, and theirs here"
    fi
    iniset "$DTN_MIGRATE_CONF" tls cert_file "$DTN_MIGRATE_TLS_CERT"
    iniset "$DTN_MIGRATE_CONF" tls key_file "$DTN_MIGRATE_TLS_KEY"
    iniset "$DTN_MIGRATE_CONF" tls ca_file "$DTN_MIGRATE_TLS_CA"
}

function configure_dtn_migrate {
    sudo install -d -o "$STACK_USER" "$DTN_MIGRATE_CONF_DIR" \
        "$DTN_MIGRATE_STAGING" "$DTN_MIGRATE_STATE"
    rm -f "$DTN_MIGRATE_CONF"

    iniset "$DTN_MIGRATE_CONF" DEFAULT debug "$ENABLE_DEBUG_LOG_LEVEL"
    iniset "$DTN_MIGRATE_CONF" DEFAULT host "$(hostname)"
    # [DEFAULT] transport_url (and the rabbit heartbeat options).
    iniset_rpc_backend dtn-migrate "$DTN_MIGRATE_CONF" DEFAULT

    # Every DTN agent, engine and API of the cloud read this file; the
    # options of the services not on this node are harmless.
    iniset "$DTN_MIGRATE_CONF" agent listen_port "$DTN_MIGRATE_PORT"
    iniset "$DTN_MIGRATE_CONF" agent staging_root "$DTN_MIGRATE_STAGING"
    iniset "$DTN_MIGRATE_CONF" agent state_dir "$DTN_MIGRATE_STATE"
    if dtn_migrate_tls; then
        configure_dtn_migrate_tls
    fi
    configure_dtn_migrate_peers

    iniset "$DTN_MIGRATE_CONF" engine agent_host "$DTN_MIGRATE_AGENT_HOST"
    configure_dtn_migrate_jobboard
    # The engine's notifications (migrations, RPO changes, drills) on the
    # cloud's bus; continuous protection policies follow Glance's.
    iniset "$DTN_MIGRATE_CONF" oslo_messaging_notifications driver \
        messagingv2
    if is_service_enabled g-api && [[ -n "${GLANCE_API_CONF:-}" ]]; then
        iniset "$GLANCE_API_CONF" oslo_messaging_notifications driver \
            messagingv2
    fi
    iniset "$DTN_MIGRATE_CONF" database connection \
        "$(database_connection_url "$DTN_MIGRATE_DB_NAME")"

    # The engine's own Glance, as the service user (configure_keystoneauth
    # would write the deprecated "interface", which [glance] lacks).
    iniset "$DTN_MIGRATE_CONF" glance auth_type password
    iniset "$DTN_MIGRATE_CONF" glance auth_url "$KEYSTONE_SERVICE_URI"
    iniset "$DTN_MIGRATE_CONF" glance username "$DTN_MIGRATE_SERVICE_USER"
    iniset "$DTN_MIGRATE_CONF" glance password "$SERVICE_PASSWORD"
    iniset "$DTN_MIGRATE_CONF" glance user_domain_name "$SERVICE_DOMAIN_NAME"
    iniset "$DTN_MIGRATE_CONF" glance project_name "$SERVICE_PROJECT_NAME"
    iniset "$DTN_MIGRATE_CONF" glance project_domain_name \
        "$SERVICE_DOMAIN_NAME"
    iniset "$DTN_MIGRATE_CONF" glance region_name "$REGION_NAME"
    iniset "$DTN_MIGRATE_CONF" glance valid_interfaces public
    iniset "$DTN_MIGRATE_CONF" glance cloud_name "$REGION_NAME"

    if is_service_enabled dtn-api; then
        iniset "$DTN_MIGRATE_CONF" api auth_strategy keystone
        configure_keystone_authtoken_middleware "$DTN_MIGRATE_CONF" \
            "$DTN_MIGRATE_SERVICE_USER" keystone_authtoken \
            "$DTN_MIGRATE_SERVICE_TYPE"
        local http=""
        if [[ -n "$DTN_MIGRATE_API_PORT" ]]; then
            http="$SERVICE_LISTEN_ADDRESS:$DTN_MIGRATE_API_PORT"
        fi
        write_uwsgi_config "$DTN_MIGRATE_UWSGI_CONF" "$DTN_MIGRATE_UWSGI" \
            "$DTN_MIGRATE_API_PATH" "$http" dtn-migrate-api
    fi
}

# The service user (the engine's Glance credentials, the API's
# keystone_authtoken), and where the API runs, the dtn-migration service
# with its endpoints.
function create_dtn_migrate_accounts {
    create_service_user "$DTN_MIGRATE_SERVICE_USER" admin
    if ! is_service_enabled dtn-api; then
        return
    fi
    local service url
    service=$(get_or_create_service "$DTN_MIGRATE_SERVICE_NAME" \
        "$DTN_MIGRATE_SERVICE_TYPE" "Image migration between clouds")
    url=$(dtn_migrate_api_url)
    get_or_create_endpoint "$service" "$REGION_NAME" "$url" "$url" "$url"
}

function init_dtn_migrate {
    recreate_database "$DTN_MIGRATE_DB_NAME"
    "$DTN_MIGRATE_BIN_DIR/dtn-migrate-manage" \
        --config-file "$DTN_MIGRATE_CONF" db sync
}

function start_dtn_migrate {
    local conf="--config-file $DTN_MIGRATE_CONF"
    # The agent only on the nodes that are DTNs.
    if is_service_enabled dtn-agent; then
        run_process dtn-agent "$DTN_MIGRATE_BIN_DIR/dtn-migrate-agent $conf"
    fi
    if is_service_enabled dtn-engine; then
        # Engine N > 1 has its own [DEFAULT] host (its RPC server and the
        # owner name of the migrations it claims) in a file of its own.
        local n service extra
        for n in $(seq "$DTN_MIGRATE_ENGINE_COUNT"); do
            service=$(dtn_migrate_engine_service "$n")
            extra=""
            if [[ "$n" -gt 1 ]]; then
                extra="$DTN_MIGRATE_CONF_DIR/$service.conf"
                iniset "$extra" DEFAULT host "$(hostname)-$n"
                extra=" --config-file $extra"
            fi
            run_process "$service" \
                "$DTN_MIGRATE_BIN_DIR/dtn-migrate-engine $conf$extra"
        done
    fi
    if is_service_enabled dtn-api; then
        run_process dtn-api "$(command -v uwsgi) --procname-prefix \
dtn-migrate-api --ini $DTN_MIGRATE_UWSGI_CONF"
        echo "Waiting for dtn-migrate-api to answer at $(dtn_migrate_api_url)"
        if ! wait_for_service "$SERVICE_TIMEOUT" "$(dtn_migrate_api_url)"; then
            die "$LINENO" "dtn-migrate-api did not start"
        fi
    fi
}

# The Horizon panel (dtn_migrate.dashboard): the "dashboard" extra, then
# its enabled files and settings snippet copied into Horizon's local
# directories by the panel's own installer.  Called at post-config: after
# DevStack's configure_horizon installed Horizon from $HORIZON_DIR (so the
# extra finds that Horizon instead of fetching one from PyPI), and before
# init_horizon collects and compresses the static files and start_horizon
# restarts Apache, which then serves the panel.
function install_dtn_migrate_dashboard {
    setup_develop "$DTN_MIGRATE_DIR" dashboard
    "$PYTHON" -m dtn_migrate.dashboard.install \
        --openstack-dashboard "$HORIZON_DIR/openstack_dashboard"
}

# What install_dtn_migrate_dashboard copied into Horizon, removed again.
function cleanup_dtn_migrate_dashboard {
    if [[ ! -d "$HORIZON_DIR/openstack_dashboard/local" ]]; then
        return
    fi
    "$PYTHON" -m dtn_migrate.dashboard.install --uninstall \
        --openstack-dashboard "$HORIZON_DIR/openstack_dashboard"
}

function stop_dtn_migrate {
    local n
    stop_process dtn-api
    for n in $(seq "$DTN_MIGRATE_ENGINE_COUNT"); do
        stop_process "$(dtn_migrate_engine_service "$n")"
    done
    stop_process dtn-agent
}

function cleanup_dtn_migrate {
    if is_service_enabled dtn-api; then
        remove_uwsgi_config "$DTN_MIGRATE_UWSGI_CONF" dtn-migrate-api
    fi
    sudo rm -rf "$DTN_MIGRATE_CONF_DIR" "$DTN_MIGRATE_STATE" \
        "$DTN_MIGRATE_STAGING"
}

if is_service_enabled dtn-api dtn-engine dtn-agent; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        echo_summary "Installing dtn-migrate"
        install_dtn_migrate
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        echo_summary "Configuring dtn-migrate"
        configure_dtn_migrate
        if is_service_enabled dtn-api dtn-engine; then
            create_dtn_migrate_accounts
            init_dtn_migrate
        fi
    elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
        echo_summary "Starting dtn-migrate"
        start_dtn_migrate
    fi

    if [[ "$1" == "unstack" ]]; then
        stop_dtn_migrate
    fi

    if [[ "$1" == "clean" ]]; then
        cleanup_dtn_migrate
    fi
fi

# The panel goes wherever Horizon runs, with or without the services
# above on the same node: it reaches the API through the catalog.
if is_service_enabled horizon; then
    if [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        echo_summary "Installing the dtn-migrate Horizon panel"
        install_dtn_migrate_dashboard
    fi

    if [[ "$1" == "clean" ]]; then
        cleanup_dtn_migrate_dashboard
    fi
fi
