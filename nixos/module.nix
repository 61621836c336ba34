# NixOS module: tentaflake.worker.agents.<name> runs a tentaflake-worker for one controller;
# tentaflake.worker.serve.<name> runs a CI validation worker (`serve`, docs/validation.md).
# This file declares the options; what they turn into (the config file, the systemd drop-ins,
# tmpfiles rules, groups and assertions) is computed by ./logic.nix and ./serve-logic.nix,
# which use builtins only so that tests can evaluate them without nixpkgs. No `with lib;`: a
# misspelt name fails to parse.
{ config, lib, pkgs, ... }:
let
  logic = import ./logic.nix;
  serveLogic = import ./serve-logic.nix;
  inherit (lib) mkOption types;
  cfg = config.tentaflake.worker;

  # A size as the worker reads it: a byte count, or digits with k, m or g (1k = 1024).
  size = types.either types.ints.unsigned (types.strMatching "[0-9]+[kmg]?");
  absPath = types.strMatching "/.*";

  agentModule = { name, config, ... }:
    let
      d = logic.defaults name;
      opt = type: default: description: mkOption { inherit type default description; };
    in {
      options = {
        enable = mkOption {
          type = types.bool;
          default = false;
          example = true;
          description = "Run a tentaflake-worker for this controller.";
        };
        workspace = mkOption {
          type = types.str;
          example = "/var/lib/hermes-coding/workspace";
          description = ''
            The controller's workspace (absolute). The controller submits requests into
            `<workspace>/.tentaflake-worker/inbox`; the worker snapshots the workspace for
            every job and never writes into it otherwise.
          '';
        };
        containerUid = mkOption {
          type = types.ints.u32;
          description = "The controller's numeric uid; jobs run as it. Never 0.";
        };
        containerGid = mkOption {
          type = types.ints.u32;
          description = ''
            The controller's numeric gid; jobs run with it and results are readable through
            it. A group `tfw-gid-<gid>` is created for it, `nogroup` is used for 65534, or
            set `hostGroup`.
          '';
        };
        hostGroup = mkOption {
          type = types.nullOr types.str;
          default = null;
          description = ''
            An existing group (declared in `users.groups` with an explicit gid equal to
            `containerGid`) to own the results instead of `tfw-gid-<gid>`.
          '';
        };
        activation = mkOption {
          type = types.enum [ "daemon" "path" ];
          default = d.activation;
          description = ''
            `daemon`: tentaflake-worker@<name>.service runs `run` (Type=notify, watchdog).
            `path`: tentaflake-worker-queue@<name>.path starts a oneshot `drain` whenever the
            inbox has an entry.
          '';
        };
        package = mkOption {
          type = types.package;
          default = cfg.package;
          defaultText = lib.literalExpression "config.tentaflake.worker.package";
          description = "The tentaflake-worker package this agent's units run.";
        };
        stateDir = opt absPath d.stateDir "Root's private state (root 0700).";
        resultsDir = opt absPath d.resultsDir
          "Published results (root, the controller's group, 02750).";
        concurrency = opt (types.ints.between 1 64) d.concurrency "Jobs run at once.";
        retentionDays = opt types.ints.positive d.retentionDays "Days results and used ids are kept.";
        auditGenerations = opt types.ints.positive d.auditGenerations "Daily audit files kept.";
        pendingTtlHours = opt types.ints.positive d.pendingTtlHours
          "Hours an unapproved request waits before it expires.";
        driver = opt (types.enum [ "runsc" "runc" "docker" "podman" ]) d.driver
          "The capsule driver (runc: the host's kernel behind its walls, and the services get what systemd/controller-runc.conf.in sets; docs/capsule-engines.md).";
        runc = mkOption {
          type = types.nullOr types.str;
          default = if config.driver == "runc" then "${pkgs.runc}/bin/runc" else null;
          defaultText = lib.literalExpression ''"''${pkgs.runc}/bin/runc" (runc driver)'';
          description = "The runc binary, or crun's (runc driver only).";
        };
        runsc = mkOption {
          type = types.nullOr types.str;
          default = if config.driver == "runsc" then "${pkgs.gvisor}/bin/runsc" else null;
          defaultText = lib.literalExpression ''"''${pkgs.gvisor}/bin/runsc" (runsc driver)'';
          description = "The runsc binary (runsc driver only).";
        };
        platform = opt (types.enum [ "systrap" "ptrace" "kvm" ]) d.platform
          "runsc --platform (runsc driver only). kvm also needs /dev/kvm in the unit.";
        warmSeconds = opt (types.nullOr (types.ints.between 0 3600)) d.warmSeconds ''
          Seconds one capsule started ahead waits for the next request after the last one
          (two while requests come back to back; runtime.warm_seconds; 0: none; runsc and runc
          drivers only). null: the worker's default, 60.
        '';
        rootfs = opt (types.nullOr types.str) d.rootfs
          "The capsule's root filesystem (runsc driver); null: host paths from systemMounts.";
        systemMounts = opt (types.nullOr (types.listOf types.str)) d.systemMounts ''
          Read-only mounts `HOST[:SANDBOX][=IDENTITY]` when rootfs is null. null (the default):
          the mounts of `toolchain`, or, with an empty toolchain, the worker's default (/usr,
          /bin, ...), which on NixOS holds almost nothing. A list replaces both.
        '';
        extraSystemMounts = opt (types.nullOr (types.listOf types.str)) d.extraSystemMounts ''
          Read-only mounts `HOST[:SANDBOX][=IDENTITY]` added after the others (systemMounts, the
          toolchain's, or the worker's default) instead of replacing them
          (runtime.extra_system_mounts; runsc driver without a rootfs). null: none.
        '';
        toolchain = mkOption {
          type = types.listOf types.package;
          default = map (n: pkgs.${n}) [ "bash" "coreutils" "findutils" "gnugrep" "gnused" "gawk"
            "gnutar" "gzip" "gnumake" "gcc" "binutils" "pkg-config" "python3" "git" ];
          defaultText = lib.literalExpression ''
            with pkgs; [ bash coreutils findutils gnugrep gnused gawk gnutar gzip gnumake gcc
                         binutils pkg-config python3 git ]'';
          description = ''
            runsc driver, no rootfs, no systemMounts: what the capsule can run. Their buildEnv's
            bin is the capsule's /usr/bin and /bin (on its PATH), and each store path of its
            closure is mounted read-only, nothing else of the store. An offline build set by
            default. [ ] leaves the worker's default system mounts.
          '';
        };
        image = mkOption {
          type = types.nullOr types.path;
          default = d.image;
          example = lib.literalExpression "pkgs.dockerTools.buildLayeredImage { name = \"worker\"; contents = [ pkgs.bash ]; }";
          description = ''
            docker/podman only: an image archive (e.g. from dockerTools.buildImage or
            buildLayeredImage) that the services load into the engine's local store before
            they start (`docker load` / `podman load`); it is never pulled. null: the image of
            imageReference is already in the local store.
          '';
        };
        imageReference = opt (types.nullOr types.str) d.imageReference ''
          docker/podman only, required: the image the capsules run, `sha256:<64 hex>` (the
          image id `docker load` prints for `image`) or `name@sha256:<64 hex>`. A start fails
          when it is not in the local store after loading `image`.
        '';
        maxRequestBytes = opt size d.maxRequestBytes "Largest inbox request.";
        maxArgv = opt types.ints.positive d.maxArgv "Most argv entries.";
        maxArgvBytes = opt size d.maxArgvBytes "Most argv bytes.";
        defaultTimeoutSeconds = opt types.ints.positive d.defaultTimeoutSeconds
          "Timeout of a request that gives none.";
        maxTimeoutSeconds = opt types.ints.positive d.maxTimeoutSeconds
          "Largest timeout a request may ask for (at most 604800).";
        maxSnapshotBytes = opt size d.maxSnapshotBytes "Snapshot byte ceiling.";
        maxSnapshotEntries = opt types.ints.positive d.maxSnapshotEntries "Snapshot entry ceiling.";
        memory = opt size d.memory "Capsule memory.";
        memorySwap = opt size d.memorySwap "Capsule memory plus swap (at least memory).";
        cpus = opt (types.strMatching "[0-9]+(\\.[0-9]{1,3})?") d.cpus "CPU quota, e.g. \"2.0\".";
        pidsLimit = opt types.ints.positive d.pidsLimit "Capsule process/thread limit.";
        workspaceTmpfsSize = opt size d.workspaceTmpfsSize "The capsule's /work.";
        tmpTmpfsSize = opt size d.tmpTmpfsSize "The capsule's /tmp.";
        maxLogBytes = opt size d.maxLogBytes "job.log cap.";
        maxArtifactBytes = opt size d.maxArtifactBytes "Artifact import byte ceiling.";
        maxArtifactEntries = opt types.ints.positive d.maxArtifactEntries
          "Artifact import entry ceiling.";
        maxChangesBytes = opt size d.maxChangesBytes "A job's changeset: byte ceiling of its files.";
        maxChangesEntries = opt types.ints.positive d.maxChangesEntries
          "A job's changeset: entry ceiling.";
        maxStoreBytes = opt (types.nullOr size) d.maxStoreBytes ''
          The generation store's ceiling (limits.max_store_bytes; at least maxSnapshotBytes).
          null: the worker's default, twice maxSnapshotBytes.
        '';
        maxWatches = opt (types.nullOr (types.ints.between 0 1048576)) d.maxWatches ''
          inotify watches the workspace's watch may hold (limits.max_watches; 0: none, every
          request reads the whole workspace). The worker never takes more than a quarter of the
          host's fs.inotify.max_user_watches, a budget every process of root shares.
          null: the worker's default, 16384.
        '';
        signingKeyFile = opt (types.nullOr absPath) d.signingKeyFile
          "ed25519 key made by `tentaflake-worker keygen`; every result is then signed.";
        signingIdentity = opt (types.nullOr types.str) d.signingIdentity
          "The identity named in signed results (with signingKeyFile).";
        cache = mkOption {
          type = types.nullOr (types.submodule cacheModule);
          default = d.cache;
          example = lib.literalExpression ''{ paths = [ "target" "build/cache" ]; maxBytes = "4g"; }'';
          description = ''
            The build cache of local-reversible jobs (runsc driver only; docs/config.md,
            "cache"): what such a job leaves under these paths is shown to the next one there.
            Approval-class jobs never see it. It lives in memory, in the generation store. null:
            no cache.
          '';
        };
        notify = mkOption {
          type = types.nullOr (types.submodule notifyModule);
          default = d.notify;
          example = lib.literalExpression ''{ command = [ "/run/current-system/sw/bin/tell-ops" ]; uid = 997; gid = 997; }'';
          description = ''
            The operator's hook (docs/config.md, "notify"): run for each request that starts
            waiting for approval, as uid:gid (never root, never containerUid), without a shell,
            with the request's id, class, reason and approve command in its environment. null:
            none (the journal and `list` still tell).
          '';
        };
        network = mkOption {
          type = types.nullOr (types.submodule networkModule);
          default = d.network;
          example = lib.literalExpression ''{ allow = [ "registry.npmjs.org:443" "*.pythonhosted.org:443" "pypi.org:443" ]; }'';
          description = ''
            Network for jobs (runsc driver only; docs/config.md, "network", and docs/egress.md):
            each capsule's one way out is the worker's egress proxy, which connects only to
            these host:port entries and records every connection. Every job gets the same
            allowlist, approved or not. The daemon's and drain's services then get the host's
            network for the proxy (PrivateNetwork=false, IP and netlink sockets, no
            IPAddressDeny) and the directory where the proxies' ids are locked
            (RuntimeDirectory=tentaflake-egress-ids), as systemd/controller-network.conf.in
            does. Each proxy runs as an id of its own that no user has: no user is declared
            for it. null: no network.
          '';
        };
      };
    };

  networkModule = {
    options = {
      allow = mkOption {
        type = types.listOf types.str;
        example = [ "registry.npmjs.org:443" "*.pythonhosted.org:443" "10.0.0.5:3128" ];
        description = ''
          1..${toString logic.maxNetworkAllow} entries NAME:PORT, *.SUFFIX:PORT (names below SUFFIX),
          IPV4:PORT or [IPV6]:PORT (that literal address); the port is required.
        '';
      };
      maxUploadBytes = mkOption {
        type = size;
        default = logic.networkDefaults.maxUploadBytes;
        description = ''
          What the proxy may send upstream for one job. Small on purpose: a job can send what
          it read to any allowed host, and this bounds how much.
        '';
      };
      maxDownloadBytes = mkOption {
        type = size;
        default = logic.networkDefaults.maxDownloadBytes;
        description = "What the proxy may relay back into the capsule for one job.";
      };
    };
  };

  notifyModule = {
    options = {
      command = mkOption {
        type = types.listOf types.str;
        example = [ "/run/current-system/sw/bin/tell-ops" "--channel" "approvals" ];
        description = "The hook's argv, an absolute path first (no PATH lookup).";
      };
      uid = mkOption {
        type = types.ints.positive;
        default = logic.notifyDefaults.uid;
        description = "The uid the hook runs as (not 0, not containerUid, not one of the egress proxies' own ids 2130706432..2130771967).";
      };
      gid = mkOption {
        type = types.ints.positive;
        default = logic.notifyDefaults.gid;
        description = "The gid the hook runs as, with no other group (not containerGid, not one of the egress proxies' own ids).";
      };
      timeoutSeconds = mkOption {
        type = types.ints.between 1 300;
        default = logic.notifyDefaults.timeoutSeconds;
        description = "The hook is killed after this many seconds.";
      };
    };
  };

  cacheModule = {
    options = {
      paths = mkOption {
        type = types.listOf types.str;
        example = [ "target" "node_modules/.cache" ];
        description = ''
          1..${toString logic.maxCachePaths} workspace-relative, normalised paths, none inside
          another, not `.tentaflake-worker` or `artifacts`. The cache owns them: jobs that use
          it do not see the workspace's own entries there.
        '';
      };
      maxBytes = mkOption {
        type = size;
        default = logic.cacheDefaults.maxBytes;
        description = "The cache's byte ceiling; the generation store's tmpfs grows by twice this.";
      };
      maxEntries = mkOption {
        type = types.ints.positive;
        default = logic.cacheDefaults.maxEntries;
        description = "The cache's entry ceiling.";
      };
    };
  };

  # What the logic needs of pkgs, as store paths: the toolchain's buildEnv and closure, the
  # image loader and the engine CLI.
  withBuilds = name: a:
    let
      engine = if a.driver == "docker" then pkgs.docker else if a.driver == "podman" then pkgs.podman else null;
      env = pkgs.buildEnv {
        name = "tentaflake-capsule-toolchain-${name}";
        paths = a.toolchain;
        pathsToLink = [ "/bin" ];
      };
      useTools = a.toolchain != [ ];
    in a // {
      toolchainEnv = if useTools then "${env}" else null;
      toolchainClosure = if useTools then "${pkgs.closureInfo { rootPaths = [ env ]; }}" else null;
      enginePackage = if engine != null then "${engine}" else null;
      imageLoader = if engine != null && a.image != null && a.imageReference != null then
        "${pkgs.writeShellScript "tentaflake-worker-load-image-${name}" (logic.imageLoadScript {
          engine = "${engine}/bin/${a.driver}";
          image = "${a.image}";
          reference = a.imageReference;
        })}"
      else null;
    };
  enabled = lib.mapAttrs withBuilds (lib.filterAttrs (_: a: a.enable) cfg.agents);
  # ---- serve workers (issue 13) -----------------------------------------------------------
  mountModule = {
    options = {
      host = mkOption { type = absPath; description = "The host path, mounted read-only."; };
      sandbox = mkOption {
        type = types.nullOr absPath;
        default = null;
        description = "Where the check sees it (null: at the host path).";
      };
      identity = mkOption {
        type = types.strMatching "[^=:[:space:]]+";
        example = "rust-1.89.0";
        description = ''
          What the mount holds (a toolchain version, a store closure's name): the environment
          digest records it, where without one it could record only the host path.
        '';
      };
    };
  };

  serveModule = { name, config, ... }:
    let
      d = serveLogic.defaults name;
      opt = type: default: description: mkOption { inherit type default description; };
      secs = types.ints.positive;
    in {
      options = {
        enable = mkOption {
          type = types.bool;
          default = false;
          example = true;
          description = "Run tentaflake-worker-serve@<label>.service.";
        };
        label = opt types.str d.label ''
          The worker's name as the server knows it, and the unit's instance name (letters,
          digits, ':', '_', '.', '-'). Two labels that differ only in case or punctuation are
          refused: they would share capsule and cgroup names.
        '';
        server = mkOption {
          type = types.strMatching "https?://.*";
          example = "https://forge.example.org";
          description = "The server's URL.";
        };
        serverAddress = opt (types.nullOr types.str) d.serverAddress ''
          host:port the worker's proxy connects to (the worker itself has no network); null: the
          host and port of `server`.
        '';
        keyFile = mkOption {
          type = absPath;
          example = "/run/secrets/ci-1.key";
          description = ''
            The signing key made by `tentaflake-worker keygen` (0600). A path as a string,
            outside the Nix store (which every user can read): it is handed to the worker as a
            systemd credential, never copied.
          '';
        };
        tokenFile = mkOption {
          type = absPath;
          example = "/run/secrets/ci-1.token";
          description = "The server's credential for the label; outside the Nix store, as keyFile.";
        };
        sandbox = opt (types.enum [ "runsc" "runc" "docker" "podman" ]) d.sandbox
          "The capsule's driver (runc: the host's kernel behind its walls, pkgs.runc on the unit's PATH and the settings of systemd/controller-runc.conf.in; docs/capsule-engines.md).";
        image = opt (types.nullOr types.str) d.image
          "docker/podman: name@sha256:<64 hex> or sha256:<64 hex>, already in the engine's store.";
        engineRuntime = opt (types.nullOr types.str) d.engineRuntime "docker/podman: the engine's gVisor runtime.";
        runsc = mkOption {
          type = types.nullOr types.str;
          default = if config.sandbox == "runsc" then "${pkgs.gvisor}/bin/runsc" else null;
          defaultText = lib.literalExpression ''"''${pkgs.gvisor}/bin/runsc" (runsc sandbox)'';
          description = "The runsc binary (runsc sandbox only).";
        };
        platform = opt (types.nullOr (types.enum [ "systrap" "ptrace" "kvm" ])) d.platform
          "runsc --platform (null: the worker's default, systrap).";
        concurrency = opt (types.ints.between 1 64) d.concurrency "Checks run at once (lanes LABEL-1 ... LABEL-N).";
        maxTimeoutSecs = opt secs d.maxTimeoutSecs "Ceiling: the longest timeout a policy may ask for.";
        maxMemoryMb = opt types.ints.positive d.maxMemoryMb "Ceiling: memory per check.";
        maxCpuSecs = opt secs d.maxCpuSecs "Ceiling: CPU time per check.";
        maxPids = opt types.ints.positive d.maxPids "Ceiling: processes per check.";
        defaultTimeoutSecs = opt secs d.defaultTimeoutSecs "Used when a policy gives no timeout (at most maxTimeoutSecs).";
        defaultMemoryMb = opt types.ints.positive d.defaultMemoryMb "Used when a policy gives no memory (at most maxMemoryMb).";
        defaultPids = opt types.ints.positive d.defaultPids "Used when a policy gives no process limit (at most maxPids).";
        defaultCpuSecs = opt secs d.defaultCpuSecs "Used when a policy gives no CPU time (at most maxCpuSecs).";
        outputMb = opt types.ints.positive d.outputMb "Output per stream; a check printing more is ended.";
        tmpMb = opt types.ints.positive d.tmpMb "The check's /tmp (in memory, per lane).";
        maxCheckoutMb = opt types.ints.positive d.maxCheckoutMb "The largest tree the worker checks out.";
        allowNetwork = opt types.bool d.allowNetwork ''
          Let policies ask for network (--allow-network). Alone it gives none: a policy with
          network then fails as this worker's fault; allowHosts gives the allowlist.
        '';
        allowHosts = opt (types.listOf types.str) d.allowHosts ''
          runsc sandbox: the allowlist a policy with network gets through the worker's egress
          proxy, 1..${toString logic.maxNetworkAllow} HOST:PORT entries as network.allow takes
          them (--allow-network and one --allow-host each). The unit then gets the host's
          network for the proxy and the proxies' lock directory, as
          systemd/controller-network.conf.in gives them.
        '';
        mounts = opt (types.listOf (types.submodule mountModule)) d.mounts ''
          Read-only mounts for the checks (runsc sandbox), each with an identity. On NixOS the
          default system mounts hold little: mount the store and a toolchain, e.g.
          [ { host = "/nix/store"; identity = "nixos-24.05"; } ].
        '';
        systemMountsIdentity = opt (types.nullOr types.str) d.systemMountsIdentity
          "The identity of the default system mounts (/usr, /bin, ...).";
        noSystemMounts = opt types.bool d.noSystemMounts "Mount none of the default system paths.";
        extraFlags = opt (types.listOf types.str) d.extraFlags
          "More serve flags (docs/validation.md), one word per element; never the token.";
      };
    };

  serveEnabled = lib.filterAttrs (_: w: w.enable) cfg.serve;
  serveOut = serveLogic.evaluate {
    workers = serveEnabled;
    runcPath = [ pkgs.runc ];
  };

  out = logic.evaluate {
    agents = enabled;
    groups = config.users.groups;
  };
  # A config that names the toolchain's closure is built once the closure is known.
  mergedConfig = name: m: pkgs.runCommand "tentaflake-worker-${name}.json" {
    nativeBuildInputs = [ pkgs.jq ];
    inherit (m) base closure;
    passAsFile = [ "base" ];
  } logic.closureMergeScript;
in {
  options.tentaflake.worker = {
    package = mkOption {
      type = types.package;
      default = pkgs.callPackage ./package.nix { };
      defaultText = lib.literalExpression "pkgs.callPackage ./package.nix { }";
      description = "The tentaflake-worker package (its units are installed from it).";
    };
    agents = mkOption {
      type = types.attrsOf (types.submodule agentModule);
      default = { };
      description = "One worker per controller, keyed by the controller's name.";
    };
    serve = mkOption {
      type = types.attrsOf (types.submodule serveModule);
      default = { };
      description = "CI validation workers (`tentaflake-worker serve`), one unit per label.";
    };
  };

  config = lib.mkMerge [
    (lib.mkIf (enabled != { }) {
      assertions = out.assertions;
      environment.etc = out.etc // lib.mapAttrs' (n: m: {
        name = "tentaflake/workers/${n}.json";
        value.source = mergedConfig n m;
      }) out.closureMerges;
      users.groups = out.groups;
      systemd.tmpfiles.rules = out.tmpfiles;
      systemd.packages = [ cfg.package ];
      systemd.services = out.services;
      systemd.paths = out.paths;
      systemd.timers = out.timers;
      environment.systemPackages = [ cfg.package ];
    })
    (lib.mkIf (serveEnabled != { }) {
      assertions = serveOut.assertions;
      environment.etc = serveOut.etc;
      systemd.packages = [ cfg.package ];
      systemd.services = serveOut.services;
      environment.systemPackages = [ cfg.package ];
    })
  ];
}
