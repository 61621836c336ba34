# The NixOS module's logic, in builtins only (no nixpkgs, no lib): from the declared agents to
# the worker config files, the systemd drop-ins, the tmpfiles rules, the groups and the
# assertions. nixos/module.nix declares the options and hands the values here; the tests
# (tests/unit/test-nix.sh) evaluate this file alone with `nix-instantiate --eval --strict`.
#
# An agent here is the attribute set of one `tentaflake.worker.agents.<name>` entry with every
# option present (the module fills in defaults; `withDefaults` does the same for tests).
let
  inherit (builtins)
    attrNames concatLists concatStringsSep elem filter foldl' genList head length listToAttrs
    match stringLength substring toJSON toString typeOf;

  # ---- small helpers (builtins only) ----------------------------------------------------
  optional = cond: x: if cond then [ x ] else [ ];
  optionalAttrs = cond: set: if cond then set else { };
  removeNulls = set: listToAttrs (map (n: { name = n; value = set.${n}; })
    (filter (n: set.${n} != null) (attrNames set)));
  unique = foldl' (acc: x: if elem x acc then acc else acc ++ [ x ]) [ ];
  hasPrefix = p: s: substring 0 (stringLength p) s == p;
  # Is `inner` equal to or below `outer`, by whole path components?
  isInside = inner: outer: inner == outer || hasPrefix (outer + "/") inner;

  # The worker's own spelling rules (docs/config.md).
  nameIsValid = name: match "[a-z0-9][a-z0-9-]{0,47}" name != null;
  # Absolute and normalised: starts with '/', not '/' itself, no empty, '.' or '..' component,
  # no trailing '/'.
  pathIsNormalized = p:
    typeOf p == "string" && hasPrefix "/" p && p != "/"
    && match ".*(//|/\\./|/\\.\\./).*" (p + "/") == null
    && match ".*/\\.{1,2}" p == null && match ".*/" p == null;

  # A size as the worker reads it: a byte count, or digits with k, m or g (binary). null when
  # it is not one (the worker would refuse it; the assertion says so first).
  parseSize = v:
    if typeOf v == "int" then (if v >= 0 then v else null)
    else if typeOf v != "string" then null
    else
      let m = match "0*([0-9]+)([kmg]?)" v;
      in if m == null || stringLength (head m) > 13 then null
      else
        let
          n = builtins.fromJSON (head m);
          unit = builtins.elemAt m 1;
        in n * (if unit == "k" then 1024 else if unit == "m" then 1048576
                else if unit == "g" then 1073741824 else 1);

  showSize = v: if typeOf v == "int" then toString v else "'${v}'";

  # ---- the build cache (docs/config.md, "cache") -------------------------------------------
  # What the module fills in for a cache that names only its paths (the worker's defaults).
  cacheDefaults = { maxBytes = "2g"; maxEntries = 200000; };
  # The worker's limits on cache.paths (parser/config.h).
  maxCachePaths = 16;
  maxCachePathBytes = 1024;
  # Names of /work the worker owns: its control directory and the artifact directory.
  reservedCachePaths = [ ".tentaflake-worker" "artifacts" ];
  cacheOf = a: if a.cache == null then null else cacheDefaults // a.cache;

  # ---- the operator's hook (docs/config.md, "notify") ---------------------------------------
  notifyDefaults = { uid = 65534; gid = 65534; timeoutSeconds = 10; };
  notifyOf = a: if (a.notify or null) == null then null else notifyDefaults // a.notify;

  # ---- network for jobs (docs/config.md, "network"; docs/egress.md) ------------------------
  # What the module fills in for a network that names only its allowlist (the worker's defaults).
  networkDefaults = { maxUploadBytes = "1m"; maxDownloadBytes = "2g"; };
  # The worker's limit on network.allow (parser/config.h); serve's --allow-host has the same.
  maxNetworkAllow = 64;
  networkOf = a: if (a.network or null) == null then null else networkDefaults // a.network;
  # The first thing wrong with an allowlist, "" when nothing is: only what is simple to say here
  # (the count, a port on every entry); the worker's parser checks each entry whole at start.
  allowProblem = entries:
    let
      n = length entries;
      portless = filter (e: typeOf e != "string" || match ".*:[0-9]+" e == null) entries;
    in if n < 1 || n > maxNetworkAllow then
      "must name 1..${toString maxNetworkAllow} host:port entries, got ${toString n}"
    else if portless != [ ] then
      "'${toString (head portless)}' has no port (NAME:PORT, *.SUFFIX:PORT, IPV4:PORT or [IPV6]:PORT)"
    else "";
  # The drop-in systemd/controller-network.conf.in, as service settings: the worker's process
  # gets the host's network for its egress proxy (the capsules stay without one), and the
  # directory where every worker of the host locks the proxies' ids (docs/egress.md).
  networkServiceConfig = {
    PrivateNetwork = false;
    RestrictAddressFamilies = "AF_UNIX AF_INET AF_INET6 AF_NETLINK";
    IPAddressDeny = "";
    RuntimeDirectory = "tentaflake-egress-ids";
    RuntimeDirectoryPreserve = "yes";
  };
  # The drop-in systemd/controller-runc.conf.in, as service settings: what runc's own work needs
  # inside the units' sandbox (docs/install.md, "The runc engine"); drop-in lines, so each adds
  # to the unit's own setting.
  runcServiceConfig = {
    RestrictNamespaces = "cgroup";
    RestrictAddressFamilies = "AF_NETLINK AF_INET AF_INET6";
    ProtectHostname = false;
    SystemCallFilter = [ "sethostname" "pidfd_getfd" "landlock_create_ruleset landlock_add_rule landlock_restrict_self" ];
    CapabilityBoundingSet = "CAP_SYS_PTRACE";
  };
  # The egress proxies' own ids (parser/config.h, CONFIG_EGRESS_ID_*): each proxy runs as one
  # no other process has, so no id the configuration names may be one of them.
  egressIdFirst = 2130706432;
  egressIdLast = 2130771967;
  isEgressId = id: id != null && id >= egressIdFirst && id <= egressIdLast;
  # Why a cache path is refused ("" when it is fine): relative, normalised, no control
  # character, components of at most 255 bytes, at most maxCachePathBytes in all, not reserved.
  cachePathProblem = p:
    let comps = filter (x: typeOf x == "string") (builtins.split "/" p);
    in if typeOf p != "string" || p == "" then "is empty"
    else if match ".*(//|/\\./|/\\.\\./).*" ("/" + p + "/") != null then
      "is not relative and normalised (no leading or trailing '/', no empty, '.' or '..' component)"
    else if match ".*[[:cntrl:]].*" p != null then "has a control character"
    else if stringLength p > maxCachePathBytes then "is longer than ${toString maxCachePathBytes} bytes"
    else if builtins.any (c: stringLength c > 255) comps then "has a component longer than 255 bytes"
    else
      let r = filter (x: isInside p x) reservedCachePaths;
      in if r != [ ] then "is '${head r}' or inside it, which the worker owns" else "";
  # The first thing wrong with a cache's paths, "" when nothing is.
  cachePathsProblem = paths:
    let
      n = length paths;
      bad = filter (p: cachePathProblem p != "") paths;
      overlapping = filter (x: x != null) (concatLists (genList (i: genList (j:
        let x = builtins.elemAt paths i; y = builtins.elemAt paths (i + j + 1);
        in if isInside x y || isInside y x then "'${x}' and '${y}'" else null)
        (n - i - 1)) n));
    in if n < 1 || n > maxCachePaths then
      "must name 1..${toString maxCachePaths} workspace-relative paths, got ${toString n}"
    else if bad != [ ] then "'${head bad}' ${cachePathProblem (head bad)}"
    else if overlapping != [ ] then
      "${head overlapping} overlap: the cache owns each path whole, so no path may be equal to or inside another"
    else "";

  # ---- defaults: the worker's own (contract section 2), as option values -----------------
  defaults = name: {
    enable = true;
    workspace = null;          # required
    containerUid = null;       # required
    containerGid = null;       # required
    hostGroup = null;
    activation = "daemon";     # "daemon": tentaflake-worker@NAME.service runs `run`;
                               # "path": tentaflake-worker-queue@NAME.path starts `drain`
    stateDir = "/var/lib/tentaflake-worker-${name}";
    resultsDir = "/run/tentaflake-worker-${name}/results";
    concurrency = 1;
    retentionDays = 14;
    auditGenerations = 14;
    pendingTtlHours = 72;
    driver = "runsc";
    runsc = null;
    runc = null;
    platform = "systrap";
    warmSeconds = null;        # null: the worker's default (60), no key written
    rootfs = null;
    systemMounts = null;       # null: the toolchain's mounts when there is one, else the
                               # worker's default list
    extraSystemMounts = null;  # added after those: runtime.extra_system_mounts (null: no key)
    image = null;              # docker/podman: an image archive (a path) to load locally
    imageReference = null;     # docker/podman: the runtime.image the worker runs
    # Filled in by the module from the `toolchain` option (store paths as strings; tests give
    # fake ones): the toolchain's buildEnv, its closureInfo, the image loader, the engine CLI.
    toolchainEnv = null;
    toolchainClosure = null;
    imageLoader = null;
    enginePackage = null;
    maxRequestBytes = "64k";
    maxArgv = 256;
    maxArgvBytes = "64k";
    defaultTimeoutSeconds = 300;
    maxTimeoutSeconds = 900;
    maxSnapshotBytes = "1g";
    maxSnapshotEntries = 200000;
    memory = "2g";
    memorySwap = "2g";
    cpus = "2.0";
    pidsLimit = 512;
    workspaceTmpfsSize = "2g";
    tmpTmpfsSize = "256m";
    maxLogBytes = "8m";
    maxArtifactBytes = "1g";
    maxArtifactEntries = 200000;
    maxChangesBytes = "1g";
    maxChangesEntries = 200000;
    maxStoreBytes = null;      # null: the worker's default (2 x maxSnapshotBytes), no key written
    maxWatches = null;         # null: the worker's default (16384, never more than a quarter of
                               # the host's fs.inotify.max_user_watches), no key written
    signingKeyFile = null;
    signingIdentity = null;
    cache = null;              # or { paths; maxBytes ? "2g"; maxEntries ? 200000; }: the build
                               # cache of local-reversible jobs (runsc driver only)
    notify = null;             # or { command; uid ? 65534; gid ? 65534; timeoutSeconds ? 10; }:
                               # the operator's hook for a request that waits (docs/config.md)
    network = null;            # or { allow; maxUploadBytes ? "1m"; maxDownloadBytes ? "2g"; }:
                               # the jobs' allowlist through the egress proxy (runsc driver only)
    package = null;            # the module passes the package (a derivation or store path)
  };

  withDefaults = name: agent: defaults name // agent;

  # The worker refuses a timeout above one week (parser/config.c).
  workerMaxTimeout = 604800;

  # ---- the toolchain (runsc driver on NixOS) ----------------------------------------------
  # The toolchain's bin directory is the capsule's /usr/bin and /bin (both on the capsule's
  # constant PATH); every path of its closure is mounted read-only where it is in the store,
  # so the symlinks of the buildEnv and the programs' libraries resolve inside the capsule and
  # nothing else of the store is visible. The closure is known only once it is built: the
  # config file is then a derivation that adds those mounts (closureMergeScript, run with jq).
  bundleDriver = a: a.driver == "runsc" || a.driver == "runc";
  usesToolchain = a: bundleDriver a && a.rootfs == null && a.systemMounts == null
    && a.toolchainEnv != null;
  toolchainMounts = env: [ "${env}/bin:/usr/bin" "${env}/bin:/bin" ];
  # The worker's parser takes at most this many system mounts (parser/config.h).
  maxSystemMounts = 1024;
  # For pkgs.runCommand with `closure` (a closureInfo), `base` (the config's JSON, passAsFile)
  # and jq on PATH: the config with one read-only mount per store path of the closure first.
  closureMergeScript = ''
    jq --rawfile paths "$closure/store-paths" \
      '.runtime.system_mounts = ([$paths | split("\n")[] | select(. != "")] + .runtime.system_mounts)' \
      "$basePath" >"$out"
    n=$(jq '(.runtime.system_mounts | length) + (.runtime.extra_system_mounts // [] | length)' "$out")
    if [ "$n" -gt ${toString maxSystemMounts} ]; then
      echo "tentaflake-worker: the toolchain's closure needs $n system mounts; the worker takes at most ${toString maxSystemMounts}: use a smaller toolchain" >&2
      exit 1
    fi
  '';

  # ---- docker/podman: the image, loaded locally, never pulled -------------------------------
  # Before the service starts: load the image archive into the engine's local store unless the
  # reference is already there, then require the reference to be there (a reference that the
  # archive does not carry stops the start with a message; nothing is ever pulled).
  imageLoadScript = { engine, image, reference }: ''
    set -eu
    if ! ${engine} image inspect ${reference} >/dev/null 2>&1; then
      ${engine} load --input ${image} >/dev/null
    fi
    if ! ${engine} image inspect ${reference} >/dev/null 2>&1; then
      echo "tentaflake-worker: '${image}' is loaded, but imageReference '${reference}' is not in the local store: set it to the image id the archive has ($(basename ${engine}) load prints it)" >&2
      exit 1
    fi
  '';

  # ---- the config file ---------------------------------------------------------------------
  configOf = name: a:
    let runscDriver = a.driver == "runsc";
    in removeNulls {
      version = 1;
      inherit name;
      workspace = a.workspace;
      state_dir = a.stateDir;
      results_dir = a.resultsDir;
      container_uid = a.containerUid;
      container_gid = a.containerGid;
      concurrency = a.concurrency;
      retention_days = a.retentionDays;
      audit_generations = a.auditGenerations;
      pending_ttl_hours = a.pendingTtlHours;
      # docker and podman refuse the runsc-only keys even as null: leave them out. An image
      # with runsc is written as given: the assertion refuses it, and so would the worker.
      runtime = removeNulls ({ driver = a.driver; image = a.imageReference; warm_seconds = a.warmSeconds; }
        // optionalAttrs runscDriver {
          runsc = a.runsc;
          platform = a.platform;
          rootfs = a.rootfs;
        }
        // optionalAttrs (a.driver == "runc") { runc = a.runc; }
        // optionalAttrs (bundleDriver a) {
          system_mounts = if usesToolchain a then toolchainMounts a.toolchainEnv else a.systemMounts;
          extra_system_mounts = a.extraSystemMounts;
        });
      limits = removeNulls {
        max_request_bytes = a.maxRequestBytes;
        max_argv = a.maxArgv;
        max_argv_bytes = a.maxArgvBytes;
        default_timeout_seconds = a.defaultTimeoutSeconds;
        max_timeout_seconds = a.maxTimeoutSeconds;
        max_snapshot_bytes = a.maxSnapshotBytes;
        max_snapshot_entries = a.maxSnapshotEntries;
        memory = a.memory;
        memory_swap = a.memorySwap;
        cpus = a.cpus;
        pids = a.pidsLimit;
        workspace_tmpfs = a.workspaceTmpfsSize;
        tmp_tmpfs = a.tmpTmpfsSize;
        max_log_bytes = a.maxLogBytes;
        max_artifact_bytes = a.maxArtifactBytes;
        max_artifact_entries = a.maxArtifactEntries;
        max_changes_bytes = a.maxChangesBytes;
        max_changes_entries = a.maxChangesEntries;
        max_store_bytes = a.maxStoreBytes;
        max_watches = a.maxWatches;
      };
      signing_key = a.signingKeyFile;
      signing_identity = a.signingIdentity;
      # No cache: no key at all (the worker reads an absent cache as none).
      cache = let c = cacheOf a; in if c == null then null else {
        paths = c.paths or [ ];
        max_bytes = c.maxBytes;
        max_entries = c.maxEntries;
      };
      notify = let n = notifyOf a; in if n == null then null else {
        command = n.command or [ ];
        uid = n.uid;
        gid = n.gid;
        timeout_seconds = n.timeoutSeconds;
      };
      # No network: no key at all (the worker reads an absent network as none).
      network = let n = networkOf a; in if n == null then null else {
        allow = n.allow or [ ];
        max_upload_bytes = n.maxUploadBytes;
        max_download_bytes = n.maxDownloadBytes;
      };
    };

  configPath = name: "/etc/tentaflake/workers/${name}.json";

  # ---- groups ------------------------------------------------------------------------------
  # The group that owns the results: an existing hostGroup, nogroup for 65534, else one
  # deterministic tfw-gid-<gid> per gid.
  groupOf = a:
    if a.hostGroup != null then a.hostGroup
    else if a.containerGid == 65534 then "nogroup"
    else "tfw-gid-${toString a.containerGid}";
  makesGroup = a: a.hostGroup == null && a.containerGid != 65534;

  # ---- assertions --------------------------------------------------------------------------
  # agents: enabled agents by name; groups: the system's users.groups (name -> { gid }).
  assertionsOf = agents: groups:
    let
      names = attrNames agents;   # sorted: deterministic messages
      opt = name: o: "tentaflake.worker.agents.${name}.${o}";
      one = name:
        let
          a = agents.${name};
          mem = parseSize a.memory;
          swap = parseSize a.memorySwap;
          snap = parseSize a.maxSnapshotBytes;
          wtmp = parseSize a.workspaceTmpfsSize;
          sizeKeys = [ "maxRequestBytes" "maxArgvBytes" "maxSnapshotBytes" "memory" "memorySwap"
                       "workspaceTmpfsSize" "tmpTmpfsSize" "maxLogBytes" "maxArtifactBytes"
                       "maxChangesBytes" ];
          hg = a.hostGroup;
          hgGid = if hg != null && groups ? ${hg} then groups.${hg}.gid or null else null;
          cache = cacheOf a;
          cacheProblem = if cache == null then "" else cachePathsProblem (cache.paths or [ ]);
          notify = notifyOf a;
          network = networkOf a;
          networkProblem = if network == null then "" else allowProblem (network.allow or [ ]);
        in [
          { assertion = nameIsValid name;
            message = "tentaflake.worker.agents: the name '${name}' is not a worker name "
              + "(^[a-z0-9][a-z0-9-]{0,47}$): it is used in paths and unit names"; }
          { assertion = a.workspace != null && hasPrefix "/" a.workspace;
            message = "${opt name "workspace"} must be an absolute path, got "
              + (if a.workspace == null then "nothing" else "'${a.workspace}'"); }
          { assertion = a.workspace == null || !(hasPrefix "/" a.workspace) || pathIsNormalized a.workspace;
            message = "${opt name "workspace"} '${toString a.workspace}' is not normalised "
              + "(no trailing '/', no empty, '.' or '..' component, not '/')"; }
          { assertion = a.containerUid != null && a.containerUid != 0 && a.containerUid != 4294967295;
            message = "${opt name "containerUid"} must be set and must not be 0 (root) or 4294967295: "
              + "the job runs as this uid"; }
          { assertion = a.containerGid != null && a.containerGid != 0 && a.containerGid != 4294967295;
            message = "${opt name "containerGid"} must be set and must not be 0 (root) or 4294967295: "
              + "the job runs with this gid and the controller reads its results through it"; }
          { assertion = !(isEgressId a.containerUid) && !(isEgressId a.containerGid);
            message = "${opt name "containerUid"} and ${opt name "containerGid"} must not be in "
              + "${toString egressIdFirst}..${toString egressIdLast}, the egress proxies' own ids"; }
        ] ++ concatLists (map (k: let
            p = a.${k};
            shared = filter (d: isInside p d) sharedDirs;
            inWs = a.workspace != null && isInside p a.workspace;
          in [
            { assertion = shared == [ ];
              message = "${opt name k} '${p}' is below '${if shared == [ ] then "" else head shared}', which "
                + "users other than root can write: the worker refuses it (every directory above "
                + "stateDir and resultsDir must be root's and writable by root only)"; }
            { assertion = !inWs;
              message = "${opt name k} '${p}' is inside the workspace '${toString a.workspace}', which "
                + "the controller owns: the worker refuses it"; }
          ]) [ "stateDir" "resultsDir" ]) ++ [
          { assertion = hg == null || groups ? ${hg};
            message = "${opt name "hostGroup"} '${toString hg}' is not declared in users.groups"; }
          { assertion = hg == null || !(groups ? ${hg}) || hgGid == a.containerGid;
            message = "${opt name "hostGroup"} '${toString hg}' has "
              + (if hgGid == null then "no explicit gid" else "gid ${toString hgGid}")
              + " in users.groups, but containerGid is ${toString a.containerGid}: they must be equal"; }
          { assertion = mem == null || swap == null || swap >= mem;
            message = "${opt name "memorySwap"} (${showSize a.memorySwap}) is below "
              + "${opt name "memory"} (${showSize a.memory}): memorySwap counts memory plus swap"; }
          { assertion = a.maxTimeoutSeconds <= workerMaxTimeout;
            message = "${opt name "maxTimeoutSeconds"} (${toString a.maxTimeoutSeconds}) is above the "
              + "worker's maximum of ${toString workerMaxTimeout} seconds (one week)"; }
          { assertion = a.defaultTimeoutSeconds <= a.maxTimeoutSeconds;
            message = "${opt name "defaultTimeoutSeconds"} (${toString a.defaultTimeoutSeconds}) is above "
              + "${opt name "maxTimeoutSeconds"} (${toString a.maxTimeoutSeconds})"; }
          { assertion = snap == null || wtmp == null || snap <= wtmp;
            message = "${opt name "maxSnapshotBytes"} (${showSize a.maxSnapshotBytes}) is above "
              + "${opt name "workspaceTmpfsSize"} (${showSize a.workspaceTmpfsSize}): the snapshot is "
              + "copied into the capsule's /work"; }
          { assertion = bundleDriver a || a.imageReference != null;
            message = "${opt name "imageReference"} is required with the ${a.driver} driver "
              + "(sha256:<64 hex> or name@sha256:<64 hex>: the image `image` loads, or one already "
              + "in the local store)"; }
          { assertion = a.driver != "runc" || a.rootfs == null;
            message = "${opt name "rootfs"} is not used with the runc driver: its capsules' root is an "
              + "empty directory the worker gives the user namespace's root"; }
          { assertion = !(bundleDriver a) || (a.image == null && a.imageReference == null);
            message = "${opt name "image"} and ${opt name "imageReference"} are only for the docker "
              + "and podman drivers"; }
          { assertion = (a.signingKeyFile == null) == (a.signingIdentity == null);
            message = "${opt name "signingKeyFile"} and ${opt name "signingIdentity"} are set together "
              + "or not at all"; }
          { assertion = cache == null || bundleDriver a;
            message = "${opt name "cache"} needs the runsc or runc driver: the engines' daemons cannot see the "
              + "worker's cache (driver ${a.driver})"; }
          { assertion = cacheProblem == "";
            message = "${opt name "cache.paths"}: ${cacheProblem}"; }
          { assertion = notify == null || (notify.command or [ ]) != [ ] && substring 0 1 (head notify.command) == "/";
            message = "${opt name "notify.command"} must name the hook by an absolute path first: it runs "
              + "without a shell or PATH"; }
          { assertion = notify == null || notify.uid != a.containerUid;
            message = "${opt name "notify.uid"} must not be containerUid (${toString a.containerUid}): the agent "
              + "could signal or trace the hook"; }
          { assertion = notify == null || notify.gid != a.containerGid;
            message = "${opt name "notify.gid"} must not be containerGid (${toString a.containerGid}): the hook would "
              + "reach the agent's group's files"; }
          { assertion = notify == null || (notify.uid > 0 && notify.gid > 0);
            message = "${opt name "notify.uid"} and ${opt name "notify.gid"} are never 0: the hook never runs as root"; }
          { assertion = notify == null || !(isEgressId notify.uid) && !(isEgressId notify.gid);
            message = "${opt name "notify.uid"} and ${opt name "notify.gid"} must not be in "
              + "${toString egressIdFirst}..${toString egressIdLast}, the egress proxies' own ids: a proxy "
              + "taken over could read the hook's environment"; }
          { assertion = cache == null || parseSize cache.maxBytes != null;
            message = "${opt name "cache.maxBytes"} (${showSize cache.maxBytes}) is not a size: a byte "
              + "count, or digits followed by k, m or g"; }
          { assertion = a.extraSystemMounts == null || (bundleDriver a && a.rootfs == null);
            message = "${opt name "extraSystemMounts"} needs the runsc or runc driver without a rootfs: they are "
              + "added to the host's system mounts (driver ${a.driver})"; }
          { assertion = network == null || bundleDriver a;
            message = "${opt name "network"} needs the runsc or runc driver: the worker passes the proxy's streams "
              + "to the runtime itself, which an engine cannot (driver ${a.driver})"; }
          { assertion = networkProblem == "";
            message = "${opt name "network.allow"}: ${networkProblem}"; }
        ] ++ map (k: {
          assertion = network == null || parseSize network.${k} != null;
          message = "${opt name "network.${k}"} (${showSize network.${k}}) is not a size: a byte count, or "
            + "digits followed by k, m or g";
        }) [ "maxUploadBytes" "maxDownloadBytes" ] ++ map (k: {
          assertion = parseSize a.${k} != null;
          message = "${opt name k} (${showSize a.${k}}) is not a size: a byte count, or digits "
            + "followed by k, m or g";
        }) sizeKeys;

      # Pairs (i < j) of agents, for what two controllers must not share.
      pairs = concatLists (genList (i: genList (j: {
        a = builtins.elemAt names i;
        b = builtins.elemAt names (i + j + 1);
      }) (length names - i - 1)) (length names));
      pairAssertions = concatLists (map (p:
        let
          wa = agents.${p.a}.workspace; wb = agents.${p.b}.workspace;
          usable = wa != null && wb != null;
        in [
          { assertion = !usable || wa != wb;
            message = "tentaflake.worker.agents: '${p.a}' and '${p.b}' share the workspace '${toString wa}'; "
              + "each controller needs its own"; }
          { assertion = !usable || wa == wb || !(isInside wa wb || isInside wb wa);
            message = "tentaflake.worker.agents: the workspace of '${p.a}' ('${toString wa}') and of "
              + "'${p.b}' ('${toString wb}') are nested; one controller would see the other's inbox"; }
          { assertion = agents.${p.a}.stateDir != agents.${p.b}.stateDir;
            message = "tentaflake.worker.agents: '${p.a}' and '${p.b}' share the state directory "
              + "'${agents.${p.a}.stateDir}'"; }
          { assertion = agents.${p.a}.resultsDir != agents.${p.b}.resultsDir;
            message = "tentaflake.worker.agents: '${p.a}' and '${p.b}' share the results directory "
              + "'${agents.${p.a}.resultsDir}'"; }
        ]) pairs);
    in concatLists (map one names) ++ pairAssertions;

  # ---- systemd -----------------------------------------------------------------------------
  # The units themselves come from the package (systemd/*.service.in, installed by
  # `make install`); each agent gets drop-ins with what the template cannot know.
  homes = [ "/home" "/root" "/run/user" ];
  # Directories that users other than root can write, or own parts of (orchestrator/dirs.h):
  # root's own directories below one of them are refused by the worker at start, and by the
  # assertions above at evaluation. /root is root's own, so it is not one of them.
  sharedDirs = [ "/tmp" "/var/tmp" "/dev/shm" "/run/lock" "/var/lock" "/home" "/run/user" ];
  underHome = p: builtins.any (h: isInside p h) homes;

  # MemoryMax= and TasksMax= of the daemon's and drain's units, from the config (the package's
  # units carry the default config's: systemd/tentaflake-worker@.service.in; docs/install.md,
  # "Memory and tasks"). In the unit's cgroup: the generation store's tmpfs (its bytes:
  # config_store_tmpfs_bytes; its inodes, about 1 KiB each: orchestrator/scratch.c), the scratch
  # tmpfs (64 MiB), the worker and 256 MiB, and 256 MiB and 256 tasks a running job (runsc's front
  # process, the egress proxy, the artifact parser). The capsules are outside it.
  genStoreLanesMax = 65;
  unitLimits = a:
    let
      mib = 1048576;
      c = a.concurrency;
      lanes = if c + 1 < genStoreLanesMax then c + 1 else genStoreLanesMax;
      cache = cacheOf a;
      caches = 2 * c + 1;
      sizeOr0 = v: let n = parseSize v; in if n == null then 0 else n;
      store = if a.maxStoreBytes == null then 2 * sizeOr0 a.maxSnapshotBytes else sizeOr0 a.maxStoreBytes;
      storeBytes = store + (if cache == null then 0 else caches * sizeOr0 cache.maxBytes);
      # The store's inodes as config_store_tmpfs_inodes counts them (docs/config.md, "Sizing the
      # store"): per cache its entries, its paths' roots and 6 files of its own, 64 for the
      # cache's files, and per lane a directory per component of each cache path.
      components = p: builtins.length (builtins.filter builtins.isString (builtins.split "/" p));
      mountDirs = if cache == null then 0 else builtins.foldl' (n: p: n + components p) 0 cache.paths;
      inodes = lanes * (a.maxSnapshotEntries + 8) + 1024
        + (if cache == null then 0
           else caches * (cache.maxEntries + builtins.length cache.paths + 6) + 64 + lanes * mountDirs);
      memoryMib = (storeBytes + mib - 1) / mib + (inodes + 1023) / 1024 + 64 + 256 + 256 * c;
    in {
      MemoryMax = "${toString memoryMib}M";
      TasksMax = 64 + 256 * c;
    };

  serviceDropIn = name: a: verb: wanted:
    let
      defaultState = a.stateDir == "/var/lib/tentaflake-worker-${name}";
      defaultResults = isInside a.resultsDir "/run/tentaflake-worker-${name}";
    in {
      overrideStrategy = "asDropin";
      wantedBy = optional wanted "multi-user.target";
      restartTriggers = [ (toJSON (configOf name a)) ];
    } // optionalAttrs (a.enginePackage != null) {
      # the worker finds the engine's CLI on PATH (after /usr/bin, empty on NixOS)
      path = [ a.enginePackage ];
    } // {
      serviceConfig = {
        ExecStart = [ "" "${a.package}/bin/tentaflake-worker --config ${configPath name} ${verb}" ];
        # The workspace as a whole (see systemd/controller-workspace.conf.in); the state and
        # results directories only when they are not the ones the unit already makes. gc
        # never touches the workspace.
        ReadWritePaths = optional (verb != "gc --scheduled") a.workspace
          ++ optional (!defaultState) a.stateDir
          ++ optional (!defaultResults) a.resultsDir;
      } // optionalAttrs (a.imageLoader != null && verb != "gc --scheduled") {
        # docker/podman: the image archive is loaded locally before the worker starts.
        ExecStartPre = [ "${a.imageLoader}" ];
      } // optionalAttrs (underHome a.workspace) {
        # ProtectHome=yes hides /home entirely, and ReadWritePaths cannot reach below it.
        ProtectHome = "read-only";
      } // optionalAttrs (a.driver == "runc" && verb != "gc --scheduled") runcServiceConfig
        // optionalAttrs (networkOf a != null && verb != "gc --scheduled") networkServiceConfig
        // optionalAttrs (verb != "gc --scheduled") (unitLimits a);
    };

  # The wake file approve leaves in the state directory (approve/decide.h): drain also starts
  # while it exists, so an approval starts the work in path mode too.
  wakeFile = ".wake";
  pathDropIn = name: a: {
    overrideStrategy = "asDropin";
    wantedBy = optional (a.activation == "path") "paths.target";
    pathConfig = {
      DirectoryNotEmpty = "${a.workspace}/.tentaflake-worker/inbox";
      PathExists = "${a.stateDir}/${wakeFile}";
    };
  };
  # Hourly `gc --scheduled` (tentaflake-worker-gc@.timer from the package), for every agent:
  # with path activation nothing else expires pending requests and results.
  timerDropIn = name: a: {
    overrideStrategy = "asDropin";
    wantedBy = [ "timers.target" ];
  };

  # ---- everything ----------------------------------------------------------------------------
  evaluate = { agents, groups ? { } }:
    let
      names = attrNames agents;
      assertions = assertionsOf agents groups;
      byName = f: listToAttrs (map (n: { name = n; value = f n agents.${n}; }) names);
      renamed = prefix: f: listToAttrs (map (n: { name = "${prefix}@${n}"; value = f n agents.${n}; }) names);
      gids = unique (map (n: agents.${n}.containerGid) (filter (n: makesGroup agents.${n}) names));
    in {
      inherit assertions;
      failed = map (x: x.message) (filter (x: !x.assertion) assertions);
      configs = byName (n: a: configOf n a);
      # Configs known at evaluation; those of a toolchain need its closure (closureMerges: the
      # module builds them with closureMergeScript).
      etc = listToAttrs (map (n: {
        name = "tentaflake/workers/${n}.json";
        value = { text = toJSON (configOf n agents.${n}); };
      }) (filter (n: !usesToolchain agents.${n}) names));
      closureMerges = listToAttrs (map (n: {
        name = n;
        value = { base = toJSON (configOf n agents.${n}); closure = agents.${n}.toolchainClosure; };
      }) (filter (n: usesToolchain agents.${n}) names));
      groups = listToAttrs (map (g: { name = "tfw-gid-${toString g}"; value = { gid = g; }; }) gids);
      tmpfiles = concatLists (map (n:
        let a = agents.${n}; in [
          "d /run/tentaflake-worker-${n} 0755 root root -"
          "d ${a.resultsDir} 2750 root ${groupOf a} -"
        ]) names);
      services =
        renamed "tentaflake-worker" (n: a: serviceDropIn n a "run" (a.activation == "daemon"))
        // renamed "tentaflake-worker-queue" (n: a: serviceDropIn n a "drain" false)
        // renamed "tentaflake-worker-gc" (n: a: serviceDropIn n a "gc --scheduled" false);
      paths = renamed "tentaflake-worker-queue" pathDropIn;
      timers = renamed "tentaflake-worker-gc" timerDropIn;
      groupNames = byName (n: a: groupOf a);
    };
in {
  inherit defaults withDefaults configOf configPath evaluate parseSize pathIsNormalized
    nameIsValid workerMaxTimeout closureMergeScript imageLoadScript maxSystemMounts wakeFile
    toolchainMounts cacheDefaults maxCachePaths maxCachePathBytes notifyDefaults networkDefaults
    maxNetworkAllow allowProblem networkServiceConfig runcServiceConfig egressIdFirst egressIdLast unitLimits;
}
