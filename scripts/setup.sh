#!/usr/bin/env bash
# Installs everything Understudy's build and tests need that a fresh machine lacks, and
# nothing that is already there: the wasm32 Rust target, rustfmt and clippy, the exact
# wasm-bindgen-cli that Cargo.lock pins, worker-build, and the npm lockfile (wrangler,
# workerd, esbuild). Safe to run again: a second run only checks versions (a second or two).
#
# Source it to get the environment exported into your shell:
#     . scripts/setup.sh
# or run it to have the `export` lines printed:
#     eval "$(scripts/setup.sh)"
#
# Why the *_BIN variables: worker-build downloads wasm-bindgen, esbuild and wasm-opt from
# GitHub unless told where they are. We point it at a wasm-bindgen built from crates.io and
# at the esbuild of the npm lockfile, and wasm-opt is off in edge/worker/Cargo.toml.
# Installed tools go to $UNDERSTUDY_TOOLS (default ~/.cache/understudy/tools), outside the
# checkout, so every clone on the machine shares them.

_us_setup() {
    set -euo pipefail
    local root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    local tools="${UNDERSTUDY_TOOLS:-$HOME/.cache/understudy/tools}"
    local worker_build_version="0.8.7"

    _us_log() { printf 'setup: %s\n' "$*" >&2; }
    _us_die() { printf 'setup: error: %s\n' "$*" >&2; return 1; }

    command -v cargo >/dev/null || _us_die "cargo not found on PATH; install Rust with rustup (https://rustup.rs)"
    command -v rustup >/dev/null || _us_die "rustup not found on PATH; the wasm32 target is installed through it"
    command -v node >/dev/null || _us_die "node not found on PATH; Node.js 20 or newer is needed for wrangler/workerd"
    command -v npm >/dev/null || _us_die "npm not found on PATH"

    # cargo install may fall back to building without --locked (see install_crate); the
    # index refresh that implies is the only network use and only happens once.
    _us_install_crate() { # crate version root
        local crate="$1" version="$2" dest="$3"
        _us_log "installing $crate $version into $dest (once per machine; a few minutes)"
        if ! cargo install "$crate" --version "=$version" --locked --root "$dest" >&2; then
            # A crate's own lockfile can pin a dependency version the registry no longer
            # serves (wasm-bindgen-cli 0.2.130 pins webpki-roots 1.0.11); resolve afresh
            # within the crate's declared ranges.
            _us_log "--locked install of $crate failed; retrying with fresh dependency resolution"
            cargo install "$crate" --version "=$version" --root "$dest" >&2
        fi
    }

    # 1. Rust: wasm target and the linters the test command runs.
    if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
        _us_log "adding rustup target wasm32-unknown-unknown"
        rustup target add wasm32-unknown-unknown >&2
    fi
    local comp
    for comp in rustfmt clippy; do
        if ! rustup component list --installed 2>/dev/null | grep -q "^$comp"; then
            _us_log "adding rustup component $comp"
            rustup component add "$comp" >&2
        fi
    done

    # 2. wasm-bindgen-cli at exactly the version of the wasm-bindgen library in Cargo.lock
    #    (the CLI refuses to process a module built by another library version).
    local wbg_version
    wbg_version="$(awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/version = |"/, ""); print; exit }' "$root/Cargo.lock")"
    [[ -n "$wbg_version" ]] || _us_die "no wasm-bindgen entry in $root/Cargo.lock; run \`cargo generate-lockfile\`"
    local wbg_bin=""
    if [[ -x "$tools/wasm-bindgen-$wbg_version/bin/wasm-bindgen" ]]; then
        wbg_bin="$tools/wasm-bindgen-$wbg_version/bin/wasm-bindgen"
    elif command -v wasm-bindgen >/dev/null && [[ "$(wasm-bindgen --version 2>/dev/null)" == "wasm-bindgen $wbg_version"* ]]; then
        wbg_bin="$(command -v wasm-bindgen)"
    else
        _us_install_crate wasm-bindgen-cli "$wbg_version" "$tools/wasm-bindgen-$wbg_version"
        wbg_bin="$tools/wasm-bindgen-$wbg_version/bin/wasm-bindgen"
    fi

    # 3. worker-build.
    local wb_bin=""
    if [[ -x "$tools/worker-build-$worker_build_version/bin/worker-build" ]]; then
        wb_bin="$tools/worker-build-$worker_build_version/bin/worker-build"
    elif command -v worker-build >/dev/null && [[ "$(worker-build --version 2>/dev/null)" == "$worker_build_version" ]]; then
        wb_bin="$(command -v worker-build)"
    else
        _us_install_crate worker-build "$worker_build_version" "$tools/worker-build-$worker_build_version"
        wb_bin="$tools/worker-build-$worker_build_version/bin/worker-build"
    fi

    # 4. npm lockfile: wrangler, workerd, miniflare, esbuild. npm writes
    #    node_modules/.package-lock.json after a complete install; reinstall when the
    #    lockfile is newer or the runtime binaries do not run.
    local nm="$root/node_modules"
    if [[ ! -f "$nm/.package-lock.json" || "$root/package-lock.json" -nt "$nm/.package-lock.json" ]] \
        || ! "$nm/.bin/workerd" --version >/dev/null 2>&1; then
        _us_log "installing npm packages from package-lock.json"
        (cd "$root" && npm ci --no-audit --no-fund --loglevel=error >&2)
    fi
    # npm may skip install scripts (ignore-scripts, or npm's own policy): then workerd's
    # and esbuild's postinstall never fetched/linked their platform binaries.
    if ! "$nm/.bin/workerd" --version >/dev/null 2>&1; then
        _us_log "workerd does not run; running its install script"
        (cd "$nm/workerd" && node install.js >&2)
        "$nm/.bin/workerd" --version >/dev/null 2>&1 || _us_die "workerd in $nm does not run; see \`$nm/.bin/workerd --version\`"
    fi
    local esbuild_bin="$nm/@esbuild/linux-x64/bin/esbuild"
    [[ -x "$esbuild_bin" ]] || _us_die "esbuild binary missing at $esbuild_bin; is @esbuild/linux-x64 in package-lock.json?"

    export UNDERSTUDY_ROOT="$root"
    export WASM_BINDGEN_BIN="$wbg_bin"
    export WORKER_BUILD_BIN="$wb_bin"
    export ESBUILD_BIN="$esbuild_bin"
    export WRANGLER_SEND_METRICS=false
    export PATH="$(dirname "$wb_bin"):$(dirname "$wbg_bin"):$root/node_modules/.bin:$PATH"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    _us_setup
    for _v in UNDERSTUDY_ROOT WASM_BINDGEN_BIN WORKER_BUILD_BIN ESBUILD_BIN WRANGLER_SEND_METRICS PATH; do
        printf 'export %s=%q\n' "$_v" "${!_v}"
    done
else
    # Sourced: install in a child shell (its `set -e` must not leak into yours), then
    # take over the environment it prints.
    _us_env="$(bash "${BASH_SOURCE[0]}")" || return 1
    eval "$_us_env"
    unset _us_env
fi
