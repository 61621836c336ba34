# Agent sets for nixos/logic.nix, evaluated by tests/unit/test-nix.sh (builtins only) and, as
# module definitions, by tests/unit/test-nix-module.sh (lib.evalModules).
#
# good: one system with several agents; every assertion holds. Its configs must equal
# tests/data/nix/expected/<name>.json and be accepted by the worker's parser.
# bad.<case>: { agents; expect; parserRejects; typeError?; }: exactly one assertion fails, with
# a message containing `expect` (under the module, an option type may refuse it first: then
# the evaluation fails with `typeError`). parserRejects: the worker's own parser refuses the
# generated config too (the assertion only says it earlier); false where only the module can
# know (groups, two agents).
let
  package = "/nix/store/00000000000000000000000000000000-tentaflake-worker-0.1.0";
  h64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  groups = {
    nogroup = { gid = 65534; };
    builders = { gid = 30000; };
    nogid = { gid = null; };
  };

  # The agents as a user writes them (only what differs from the defaults).
  hermes = {
    workspace = "/var/lib/hermes-coding/workspace";
    containerUid = 10000;
    containerGid = 10000;
    # the seed's example, with integer sizes
    maxSnapshotBytes = 1024 * 1024 * 1024;
    maxSnapshotEntries = 200000;
    maxTimeoutSeconds = 900;
    memory = "2g";
    memorySwap = "2g";
    cpus = "2.0";
    pidsLimit = 512;
    workspaceTmpfsSize = "2g";
    tmpTmpfsSize = "256m";
  };
  good = {
    hermes-coding = hermes;
    # shares gid 10000 with hermes-coding: one tfw-gid-10000 group for both
    hermes-review = {
      workspace = "/var/lib/hermes-review/workspace";
      containerUid = 10001;
      containerGid = 10000;
    };
    zeroclaw = {
      workspace = "/var/lib/zeroclaw-zeroclaw/data";
      containerUid = 65534;
      containerGid = 65534;
      activation = "path";
      extraSystemMounts = [ "/opt/node-20:/opt/node=node-20" ];
    };
    builder = {
      workspace = "/home/builder/ws";
      containerUid = 30000;
      containerGid = 30000;
      hostGroup = "builders";
      stateDir = "/srv/tfw/builder-state";
      resultsDir = "/srv/tfw/builder-results";
      runsc = "/usr/bin/runsc";
      systemMounts = [ "/nix/store=nixpkgs-24.05" "/opt/tools/bin:/usr/bin" ];
      concurrency = 2;
      memory = "4g";
      memorySwap = "6g";
      cpus = "1.5";
      maxTimeoutSeconds = 3600;
      defaultTimeoutSeconds = 600;
      signingKeyFile = "/srv/tfw/builder-state/signing.key";
      signingIdentity = "builder@ci.example";
      # maxEntries left to its default
      cache = { paths = [ "target" "build/cache" ]; maxBytes = "1g"; };
      # uid, gid left to their defaults
      notify = { command = [ "/opt/tools/bin/tell-ops" "--channel" "approvals" ]; timeoutSeconds = 20; };
      # maxDownloadBytes left to its default; an internal mirror listed by its literal address
      network = { allow = [ "registry.npmjs.org:443" "*.pythonhosted.org:443" "10.0.0.5:3128" ];
                  maxUploadBytes = "512k"; };
    };
    docker-one = {
      workspace = "/srv/docker-one/ws";
      containerUid = 1001;
      containerGid = 1001;
      driver = "docker";
      imageReference = "sha256:${h64}";
    };
    # runsc with a toolchain (the module's default on NixOS): its buildEnv's bin is /usr/bin
    # and /bin; the closure's mounts are added when the config is built (closureMergeScript).
    # toolchainEnv and toolchainClosure are what the module computes from `toolchain`; the
    # module test leaves them out and lets the module (with the stub pkgs) compute them.
    tools = {
      workspace = "/srv/tools/ws";
      containerUid = 2001;
      containerGid = 2001;
      activation = "path";
      toolchainEnv = toolchainEnv;
      toolchainClosure = "/nix/store/33333333333333333333333333333333-closure-info";
    };
  };
  toolchainEnv = "/nix/store/22222222222222222222222222222222-tentaflake-capsule-toolchain-tools";

  one = name: extra: { agents = { ${name} = hermes // extra; }; };
  bad = {
    uid-zero = one "a" { containerUid = 0; } // {
      expect = "tentaflake.worker.agents.a.containerUid must be set and must not be 0 (root)";
      parserRejects = true; };
    gid-zero = one "a" { containerGid = 0; } // {
      expect = "tentaflake.worker.agents.a.containerGid must be set and must not be 0 (root)";
      parserRejects = true; };
    hostgroup-gid-differs = one "a" { hostGroup = "builders"; } // {
      expect = "tentaflake.worker.agents.a.hostGroup 'builders' has gid 30000 in users.groups, but containerGid is 10000";
      parserRejects = false; };
    hostgroup-without-gid = one "a" { hostGroup = "nogid"; } // {
      expect = "tentaflake.worker.agents.a.hostGroup 'nogid' has no explicit gid in users.groups";
      parserRejects = false; };
    hostgroup-undeclared = one "a" { hostGroup = "staff"; } // {
      expect = "tentaflake.worker.agents.a.hostGroup 'staff' is not declared in users.groups";
      parserRejects = false; };
    workspace-relative = one "a" { workspace = "var/lib/a/ws"; } // {
      expect = "tentaflake.worker.agents.a.workspace must be an absolute path, got 'var/lib/a/ws'";
      parserRejects = true; };
    workspace-not-normalised = one "a" { workspace = "/var/lib/a/../ws"; } // {
      expect = "tentaflake.worker.agents.a.workspace '/var/lib/a/../ws' is not normalised";
      parserRejects = true; };
    swap-below-memory = one "a" { memory = "4g"; memorySwap = "2g"; } // {
      expect = "tentaflake.worker.agents.a.memorySwap ('2g') is below tentaflake.worker.agents.a.memory ('4g')";
      parserRejects = true; };
    timeout-above-worker-maximum = one "a" { maxTimeoutSeconds = 604801; } // {
      expect = "tentaflake.worker.agents.a.maxTimeoutSeconds (604801) is above the worker's maximum of 604800 seconds";
      parserRejects = true; };
    default-timeout-above-maximum = one "a" { maxTimeoutSeconds = 120; } // {
      expect = "tentaflake.worker.agents.a.defaultTimeoutSeconds (300) is above tentaflake.worker.agents.a.maxTimeoutSeconds (120)";
      parserRejects = true; };
    snapshot-above-tmpfs = one "a" { maxSnapshotBytes = "3g"; } // {
      expect = "tentaflake.worker.agents.a.maxSnapshotBytes ('3g') is above tentaflake.worker.agents.a.workspaceTmpfsSize ('2g')";
      parserRejects = true; };
    not-a-size = one "a" { tmpTmpfsSize = "256 MB"; } // {
      expect = "tentaflake.worker.agents.a.tmpTmpfsSize ('256 MB') is not a size";
      parserRejects = true;
      # the module's option type refuses it before any assertion runs
      typeError = "tentaflake.worker.agents.a.tmpTmpfsSize' is not of type"; };
    bad-name = one "Hermes_1" { } // {
      expect = "the name 'Hermes_1' is not a worker name";
      parserRejects = true; };
    docker-without-image = one "a" { driver = "docker"; } // {
      expect = "tentaflake.worker.agents.a.imageReference is required with the docker driver";
      parserRejects = true; };
    runsc-with-image = one "a" { imageReference = "sha256:${h64}"; } // {
      expect = "tentaflake.worker.agents.a.image and tentaflake.worker.agents.a.imageReference are only for the docker and podman drivers";
      parserRejects = true; };
    signing-key-alone = one "a" { signingKeyFile = "/var/lib/tentaflake-worker-a/key"; } // {
      expect = "tentaflake.worker.agents.a.signingKeyFile and tentaflake.worker.agents.a.signingIdentity are set together";
      parserRejects = true; };
    # issue 19: root's own directories only below directories that root alone can write
    state-dir-below-tmp = one "a" { stateDir = "/tmp/tentaflake-a"; } // {
      expect = "tentaflake.worker.agents.a.stateDir '/tmp/tentaflake-a' is below '/tmp', which users other than root can write";
      parserRejects = false; };
    results-dir-below-home = one "a" { resultsDir = "/home/agent/results"; } // {
      expect = "tentaflake.worker.agents.a.resultsDir '/home/agent/results' is below '/home', which users other than root can write";
      parserRejects = false; };
    results-dir-in-workspace = one "a" { resultsDir = "/var/lib/hermes-coding/workspace/results"; } // {
      expect = "tentaflake.worker.agents.a.resultsDir '/var/lib/hermes-coding/workspace/results' is inside the workspace '/var/lib/hermes-coding/workspace'";
      parserRejects = true; };
    # the build cache: the parser's rules on cache, said at evaluation
    cache-with-docker = one "a" { driver = "docker"; imageReference = "sha256:${h64}"; cache = { paths = [ "target" ]; }; } // {
      expect = "tentaflake.worker.agents.a.cache needs the runsc or runc driver: the engines' daemons cannot see the worker's cache";
      parserRejects = true; };
    # the runc driver (docs/capsule-engines.md): its root is the worker's empty directory
    runc-with-rootfs = one "a" { driver = "runc"; rootfs = "/srv/root"; } // {
      expect = "tentaflake.worker.agents.a.rootfs is not used with the runc driver";
      parserRejects = false; }; # the module writes no rootfs for runc: the assertion is the refusal
    notify-relative = one "a" { notify = { command = [ "tell-ops" ]; }; } // {
      expect = "tentaflake.worker.agents.a.notify.command must name the hook by an absolute path first"; parserRejects = true; };
    notify-as-the-controller = one "a" { notify = { command = [ "/bin/true" ]; uid = 10000; }; } // {
      expect = "tentaflake.worker.agents.a.notify.uid must not be containerUid (10000)"; parserRejects = true; };
    notify-in-the-controllers-group = one "a" { notify = { command = [ "/bin/true" ]; gid = 10000; }; } // {
      expect = "tentaflake.worker.agents.a.notify.gid must not be containerGid (10000)"; parserRejects = true; };
    # the egress proxies' own ids (issue 33 finding 4): never the hook's, never the controller's
    notify-as-an-egress-proxy = one "a" { notify = { command = [ "/bin/true" ]; uid = 2130706432; }; } // {
      expect = "tentaflake.worker.agents.a.notify.uid and tentaflake.worker.agents.a.notify.gid must not be in 2130706432..2130771967, the egress proxies' own ids";
      parserRejects = true; };
    notify-group-of-an-egress-proxy = one "a" { notify = { command = [ "/bin/true" ]; gid = 2130771967; }; } // {
      expect = "tentaflake.worker.agents.a.notify.uid and tentaflake.worker.agents.a.notify.gid must not be in 2130706432..2130771967";
      parserRejects = true; };
    controller-as-an-egress-proxy = one "a" { containerUid = 2130740000; } // {
      expect = "tentaflake.worker.agents.a.containerUid and tentaflake.worker.agents.a.containerGid must not be in 2130706432..2130771967";
      parserRejects = true; };
    cache-without-paths = one "a" { cache = { paths = [ ]; }; } // {
      expect = "tentaflake.worker.agents.a.cache.paths: must name 1..16 workspace-relative paths, got 0";
      parserRejects = true; };
    cache-path-absolute = one "a" { cache = { paths = [ "target" "/srv/build" ]; }; } // {
      expect = "tentaflake.worker.agents.a.cache.paths: '/srv/build' is not relative and normalised";
      parserRejects = true; };
    cache-path-dotdot = one "a" { cache = { paths = [ "build/../../etc" ]; }; } // {
      expect = "tentaflake.worker.agents.a.cache.paths: 'build/../../etc' is not relative and normalised";
      parserRejects = true; };
    cache-path-artifacts = one "a" { cache = { paths = [ "artifacts/cache" ]; }; } // {
      expect = "tentaflake.worker.agents.a.cache.paths: 'artifacts/cache' is 'artifacts' or inside it, which the worker owns";
      parserRejects = true; };
    cache-path-control-dir = one "a" { cache = { paths = [ ".tentaflake-worker" ]; }; } // {
      expect = "tentaflake.worker.agents.a.cache.paths: '.tentaflake-worker' is '.tentaflake-worker' or inside it";
      parserRejects = true; };
    cache-paths-overlap = one "a" { cache = { paths = [ "build" "target" "build/x" ]; }; } // {
      expect = "tentaflake.worker.agents.a.cache.paths: 'build' and 'build/x' overlap";
      parserRejects = true; };
    extra-mounts-with-docker = one "a" { driver = "docker"; imageReference = "sha256:${h64}"; extraSystemMounts = [ "/opt/x" ]; } // {
      expect = "tentaflake.worker.agents.a.extraSystemMounts needs the runsc or runc driver without a rootfs";
      # the engines' configs leave the runsc-only keys out: only the module can say it
      parserRejects = false; };
    extra-mounts-with-rootfs = one "a" { rootfs = "/srv/rootfs"; extraSystemMounts = [ "/opt/x" ]; } // {
      expect = "tentaflake.worker.agents.a.extraSystemMounts needs the runsc or runc driver without a rootfs";
      parserRejects = true; };
    # network for jobs: the parser's rules on network, said at evaluation
    network-with-docker = one "a" { driver = "docker"; imageReference = "sha256:${h64}"; network = { allow = [ "pypi.org:443" ]; }; } // {
      expect = "tentaflake.worker.agents.a.network needs the runsc or runc driver: the worker passes the proxy's streams to the runtime itself";
      parserRejects = true; };
    network-allow-empty = one "a" { network = { allow = [ ]; }; } // {
      expect = "tentaflake.worker.agents.a.network.allow: must name 1..64 host:port entries, got 0";
      parserRejects = true; };
    network-allow-too-many = one "a" { network = { allow = builtins.genList (i: "h${toString i}.example.org:443") 65; }; } // {
      expect = "tentaflake.worker.agents.a.network.allow: must name 1..64 host:port entries, got 65";
      parserRejects = true; };
    network-entry-without-port = one "a" { network = { allow = [ "pypi.org:443" "files.pythonhosted.org" ]; }; } // {
      expect = "tentaflake.worker.agents.a.network.allow: 'files.pythonhosted.org' has no port";
      parserRejects = true; };
    shared-workspace = {
      agents = { a = hermes; b = hermes // { containerUid = 10001; }; };
      expect = "tentaflake.worker.agents: 'a' and 'b' share the workspace '/var/lib/hermes-coding/workspace'";
      parserRejects = false; };
    nested-workspace = {
      agents = { a = hermes; b = hermes // { workspace = "/var/lib/hermes-coding/workspace/sub"; }; };
      expect = "tentaflake.worker.agents: the workspace of 'a' ('/var/lib/hermes-coding/workspace') and of 'b' ('/var/lib/hermes-coding/workspace/sub') are nested";
      parserRejects = false; };
    shared-state-dir = {
      agents = { a = hermes; b = hermes // { workspace = "/srv/b"; stateDir = "/var/lib/tentaflake-worker-a"; }; };
      expect = "tentaflake.worker.agents: 'a' and 'b' share the state directory '/var/lib/tentaflake-worker-a'";
      parserRejects = false; };
  };
in {
  inherit package groups good bad toolchainEnv;
}
