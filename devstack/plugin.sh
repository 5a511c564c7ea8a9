#!/bin/bash
# DevStack plugin for dtn-migrate: installs the project and runs
# dtn-migrate-agent on this node as a DTN.

function install_dtn_migrate {
    setup_develop $DTN_MIGRATE_DIR
    install_package python3-pyverbs || true
}

function configure_dtn_migrate {
    sudo install -d -o $STACK_USER $DTN_MIGRATE_CONF_DIR \
        $DTN_MIGRATE_STAGING $DTN_MIGRATE_STATE
    rm -f $DTN_MIGRATE_CONF
    iniset $DTN_MIGRATE_CONF DEFAULT host $(hostname)
    iniset_rpc_backend dtn-migrate $DTN_MIGRATE_CONF
    iniset $DTN_MIGRATE_CONF agent listen_port $DTN_MIGRATE_PORT
    iniset $DTN_MIGRATE_CONF agent staging_root $DTN_MIGRATE_STAGING
    iniset $DTN_MIGRATE_CONF agent state_dir $DTN_MIGRATE_STATE
    local names="" peer name addr port
    for peer in $DTN_MIGRATE_PEERS; do
        name=${peer%%=*}
        addr=${peer#*=}
        port=${addr##*:}
        [[ "$port" == "$addr" ]] && port=$DTN_MIGRATE_PORT
        addr=${addr%%:*}
        names="${names:+$names,}$name"
        iniset $DTN_MIGRATE_CONF "peer:$name" address $addr
        iniset $DTN_MIGRATE_CONF "peer:$name" port $port
        if [[ ! -f $DTN_MIGRATE_CONF_DIR/$name.key ]]; then
            openssl rand -hex 32 > $DTN_MIGRATE_CONF_DIR/$name.key
            chmod 600 $DTN_MIGRATE_CONF_DIR/$name.key
            echo "dtn-migrate: copy $DTN_MIGRATE_CONF_DIR/$name.key to peer $name"
        fi
        iniset $DTN_MIGRATE_CONF "peer:$name" key_file \
            $DTN_MIGRATE_CONF_DIR/$name.key
    done
    iniset $DTN_MIGRATE_CONF agent peers "$names"
}

function start_dtn_migrate {
    run_process dtn-migrate-agent \
        "$DTN_MIGRATE_BIN_DIR/dtn-migrate-agent --config-file $DTN_MIGRATE_CONF"
}

function stop_dtn_migrate {
    stop_process dtn-migrate-agent
}

DTN_MIGRATE_BIN_DIR=$(get_python_exec_prefix)

if is_service_enabled dtn-migrate-agent; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        install_dtn_migrate
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        configure_dtn_migrate
    elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
        start_dtn_migrate
    fi
    if [[ "$1" == "unstack" ]]; then
        stop_dtn_migrate
    fi
    if [[ "$1" == "clean" ]]; then
        sudo rm -rf $DTN_MIGRATE_CONF_DIR $DTN_MIGRATE_STATE
    fi
fi
