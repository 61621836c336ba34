# The NixOS module's logic for serve workers (tentaflake.worker.serve.<name>), in builtins only
# as ./logic.nix is for the inbox agents: from the declared workers to the per-instance files of
# the package's tentaflake-worker-serve@LABEL.service (systemd/tentaflake-worker-serve@.service.in),
# the drop-ins and the assertions. nixos/module.nix declares the options and hands the values
# here; tests/unit/test-nix-serve.sh evaluates this file alone.
#
# What the unit reads, per label (docs/validation.md):
#   /etc/tentaflake/serve/LABEL.conf    TENTAFLAKE_SERVE_ADDRESS and TENTAFLAKE_SERVE_FLAGS,
#                                       generated here (no secret: it may live in the store)
#   /etc/tentaflake/serve/LABEL.key     symlinks to keyFile and tokenFile, which must be outside
#   /etc/tentaflake/serve/LABEL.token   the store (it is world-readable): LoadCredential= reads
#                                       them through the links as root
# The assertions fail closed: a key or token in the store, an image not pinned by digest, a
# default above its ceiling, a mount without identity, a flag the unit could not pass intact,
# two labels that fold to one name.
let
  inherit (builtins)
    attrNames concatLists concatStringsSep elem filter genList head length listToAttrs map match
    replaceStrings stringLength substring toString typeOf;
  # The allowlist's rules and the network drop-in's settings, shared with the inbox agents.
  inherit (import ./logic.nix) allowProblem networkServiceConfig runcServiceConfig;

  optional = cond: x: if cond then [ x ] else [ ];
  hasPrefix = p: s: substring 0 (stringLength p) s == p;
  isInside = inner: outer: inner == outer || hasPrefix (outer + "/") inner;
  pathIsNormalized = p:
    typeOf p == "string" && hasPrefix "/" p && p != "/"
    && match ".*(//|/\\./|/\\.\\./).*" (p + "/") == null
    && match ".*/\\.{1,2}" p == null && match ".*/" p == null;
  inStore = p: typeOf p == "string" && (hasPrefix "/nix/store/" p || p == "/nix/store");

  upper = [ "A" "B" "C" "D" "E" "F" "G" "H" "I" "J" "K" "L" "M" "N" "O" "P" "Q" "R" "S" "T" "U" "V" "W" "X" "Y" "Z" ];
  lower = [ "a" "b" "c" "d" "e" "f" "g" "h" "i" "j" "k" "l" "m" "n" "o" "p" "q" "r" "s" "t" "u" "v" "w" "x" "y" "z" ];
  # serve's config name for a label (validation/serve.c name_from_label): lowercase, every
  # character but [a-z0-9] as '-', at most 48 with the "serve-" prefix.
  foldLabel = label:
    let
      l = replaceStrings upper lower label;
      chars = genList (i: substring i 1 l) (stringLength l);
      folded = concatStringsSep "" (map (c: if match "[a-z0-9]" c != null then c else "-") chars);
    in substring 0 48 ("serve-" + folded);

  # A label that is also a unit instance name as it is (no systemd-escape): serve's rule
  # (printable, no space, at most 128) and systemd's unit-name characters.
  labelIsValid = l: typeOf l == "string" && match "[A-Za-z0-9:_.-]{1,128}" l != null;
  imageIsPinned = i: typeOf i == "string"
    && (match "sha256:[0-9a-f]{64}" i != null || match "[^@[:space:]]+@sha256:[0-9a-f]{64}" i != null);
  # One word of TENTAFLAKE_SERVE_FLAGS: the unit passes $TENTAFLAKE_SERVE_FLAGS split at
  # whitespace, and the EnvironmentFile quotes it with "...".
  wordIsSafe = w: match "[^[:space:]\"'\\\\$`]+" w != null;

  defaults = name: {
    enable = true;
    label = name;
    server = null;             # required: http:// or https:// URL
    serverAddress = null;      # null: host:port from server
    keyFile = null;            # required, outside the store
    tokenFile = null;          # required, outside the store
    sandbox = "runsc";
    image = null;              # docker/podman: pinned by digest
    engineRuntime = null;
    runsc = null;
    platform = null;
    concurrency = 1;
    maxTimeoutSecs = 3600;
    maxMemoryMb = 8192;
    maxCpuSecs = 3600;
    maxPids = 4096;
    defaultTimeoutSecs = 600;
    defaultMemoryMb = 2048;
    defaultPids = 512;
    defaultCpuSecs = 600;
    outputMb = 8;
    tmpMb = 512;
    maxCheckoutMb = 4096;
    allowNetwork = false;
    allowHosts = [ ];          # HOST:PORT entries for --allow-host: a policy with network gets them
    mounts = [ ];              # [ { host; sandbox ? null; identity; } ]
    systemMountsIdentity = null;
    noSystemMounts = false;
    extraFlags = [ ];
  };
  withDefaults = name: w: defaults name // w;

  # MemoryMax= and TasksMax= for the worker's lanes (docs/validation.md, "Memory"): the worker
  # and 256 MiB, then for each lane up to 1 GiB (the largest manifest and kept checkout it
  # accepts, held at once: about 925 MiB, its runsc front processes, egress proxy and runsc
  # calls) and 256
  # tasks. The capsules are outside the unit's cgroup.
  unitLimits = w: {
    MemoryMax = "${toString (256 + 1024 * w.concurrency)}M";
    TasksMax = 64 + 256 * w.concurrency;
  };

  # host:port of an http(s) URL (the proxy's TENTAFLAKE_SERVE_ADDRESS).
  addressOf = url:
    let m = if typeOf url == "string" then match "(https?)://([^/?#]+).*" url else null;
    in if m == null then null
    else
      let scheme = head m; hostport = builtins.elemAt m 1;
      in if match ".*:[0-9]+" hostport != null then hostport
      else hostport + (if scheme == "https" then ":443" else ":80");
  addressOfWorker = w: if w.serverAddress != null then w.serverAddress else addressOf w.server;

  mountFlag = m:
    "${m.host}${if (m.sandbox or null) != null then ":${m.sandbox}" else ""}=${m.identity}";

  # The flags the unit's TENTAFLAKE_SERVE_FLAGS carries (the unit adds --label, --key,
  # --token-file, --state-dir and --server-socket itself).
  flagsOf = w:
    let
      n = flag: v: [ "--${flag}" (toString v) ];
      runscSandbox = w.sandbox == "runsc";
    in [ "--server" w.server "--sandbox" w.sandbox ]
      ++ (if w.image != null then [ "--image" w.image ] else [ ])
      ++ (if w.engineRuntime != null then [ "--engine-runtime" w.engineRuntime ] else [ ])
      ++ (if runscSandbox && w.runsc != null then [ "--runsc" w.runsc ] else [ ])
      ++ (if runscSandbox && w.platform != null then [ "--platform" w.platform ] else [ ])
      ++ n "concurrency" w.concurrency
      ++ n "max-timeout-secs" w.maxTimeoutSecs ++ n "max-memory-mb" w.maxMemoryMb
      ++ n "max-cpu-secs" w.maxCpuSecs ++ n "max-pids" w.maxPids
      ++ n "default-timeout-secs" w.defaultTimeoutSecs ++ n "default-memory-mb" w.defaultMemoryMb
      ++ n "default-pids" w.defaultPids ++ n "default-cpu-secs" w.defaultCpuSecs
      ++ n "output-mb" w.outputMb ++ n "tmp-mb" w.tmpMb ++ n "max-checkout-mb" w.maxCheckoutMb
      # --allow-host needs --allow-network: an allowlist implies it.
      ++ optional (w.allowNetwork || w.allowHosts != [ ]) "--allow-network"
      ++ concatLists (map (h: [ "--allow-host" h ]) w.allowHosts)
      ++ optional w.noSystemMounts "--no-system-mounts"
      ++ (if w.systemMountsIdentity != null then [ "--system-mounts-identity" w.systemMountsIdentity ] else [ ])
      ++ concatLists (map (m: [ "--mount" (mountFlag m) ]) w.mounts)
      ++ w.extraFlags;

  confOf = w: ''
    # Generated by the NixOS module (tentaflake.worker.serve): the flags of
    # tentaflake-worker-serve@${w.label}.service. No secret belongs here.
    TENTAFLAKE_SERVE_ADDRESS=${toString (addressOfWorker w)}
    TENTAFLAKE_SERVE_FLAGS="${concatStringsSep " " (flagsOf w)}"
  '';

  # ---- assertions --------------------------------------------------------------------------
  assertionsOf = workers:
    let
      names = attrNames workers;
      opt = name: o: "tentaflake.worker.serve.${name}.${o}";
      one = name:
        let
          w = workers.${name};
          engine = w.sandbox == "docker" || w.sandbox == "podman";
          secret = o: v: [
            { assertion = typeOf v == "string" && pathIsNormalized v;
              message = "${opt name o} must be an absolute, normalised path, got "
                + (if v == null then "nothing" else "'${toString v}'"); }
            { assertion = !(inStore v);
              message = "${opt name o} '${toString v}' is inside the Nix store, which every user can "
                + "read: give the path of a file outside it (e.g. under /run/secrets or /etc/tentaflake)"; }
          ];
          ceiling = d: c: {
            assertion = w.${d} <= w.${c};
            message = "${opt name d} (${toString w.${d}}) is above its ceiling ${opt name c} (${toString w.${c}})";
          };
          badMounts = filter (m: !(typeOf (m.identity or null) == "string" && m.identity != ""
            && wordIsSafe m.identity && match ".*[=:].*" m.identity == null)) w.mounts;
          unnormal = filter (m: !(pathIsNormalized m.host)
            || ((m.sandbox or null) != null && !(pathIsNormalized m.sandbox))) w.mounts;
          holds = f: m: typeOf f == "string" && pathIsNormalized m.host && isInside f m.host;
          exposing = filter (m: holds w.keyFile m || holds w.tokenFile m) w.mounts;
          serverOk = typeOf w.server == "string" && match "https?://[^[:space:]/]+(/[^[:space:]]*)?" w.server != null;
          words = filter (x: !(wordIsSafe x)) (flagsOf w);
          hostsProblem = if w.allowHosts == [ ] then "" else allowProblem w.allowHosts;
        in secret "keyFile" w.keyFile ++ secret "tokenFile" w.tokenFile ++ [
          { assertion = labelIsValid w.label;
            message = "${opt name "label"} '${toString w.label}' is not a label the unit can carry: 1 to 128 "
              + "letters, digits, ':', '_', '.' or '-' (it is the unit's instance name)"; }
          { assertion = serverOk;
            message = "${opt name "server"} must be an http:// or https:// URL, got "
              + (if w.server == null then "nothing" else "'${toString w.server}'"); }
          { assertion = !serverOk || addressOfWorker w != null && match "[^[:space:]]+:[0-9]+" (addressOfWorker w) != null;
            message = "${opt name "serverAddress"}: the proxy needs the server's host:port"; }
          { assertion = !engine || w.image != null;
            message = "${opt name "image"} is required with the ${w.sandbox} sandbox (name@sha256:<64 hex> "
              + "or sha256:<64 hex>, already in the engine's local store)"; }
          { assertion = w.image == null || imageIsPinned w.image;
            message = "${opt name "image"} '${toString w.image}' is not pinned: it must be name@sha256:<64 hex> "
              + "or sha256:<64 hex> (a tag can change under the worker; the environment digest would lie)"; }
          { assertion = engine || w.image == null;
            message = "${opt name "image"} is only for the docker and podman sandboxes"; }
          { assertion = !engine || w.allowHosts == [ ];
            message = "${opt name "allowHosts"} is for the runsc and runc sandboxes: the worker passes the proxy's "
              + "streams to the capsule itself, which an engine cannot"; }
          { assertion = w.sandbox == "runsc" || w.platform == null;
            message = "${opt name "platform"} is gVisor's: for the runsc sandbox only (serve refuses --platform with ${w.sandbox})"; }
          { assertion = hostsProblem == "";
            message = "${opt name "allowHosts"}: ${hostsProblem}"; }
          { assertion = !engine || (w.mounts == [ ] && w.systemMountsIdentity == null);
            message = "${opt name "mounts"} and ${opt name "systemMountsIdentity"} are for the runsc and runc sandboxes; "
              + "with ${w.sandbox} the image is the root"; }
          (ceiling "defaultTimeoutSecs" "maxTimeoutSecs")
          (ceiling "defaultMemoryMb" "maxMemoryMb")
          (ceiling "defaultPids" "maxPids")
          (ceiling "defaultCpuSecs" "maxCpuSecs")
          { assertion = w.maxTimeoutSecs <= 604800;
            message = "${opt name "maxTimeoutSecs"} (${toString w.maxTimeoutSecs}) is above the worker's maximum of 604800 seconds (one week)"; }
          { assertion = badMounts == [ ];
            message = "${opt name "mounts"}: every mount needs an identity naming its content "
              + "(e.g. rust-1.89.0, no '=', ':' or space): the environment digest records it; "
              + "without one: ${concatStringsSep ", " (map (m: "'${toString m.host}'") badMounts)}"; }
          { assertion = unnormal == [ ];
            message = "${opt name "mounts"}: host and sandbox paths must be absolute and normalised: "
              + concatStringsSep ", " (map (m: "'${toString m.host}'") unnormal); }
          { assertion = exposing == [ ];
            message = "${opt name "mounts"}: '${concatStringsSep "', '" (map (m: m.host) exposing)}' "
              + "contains the keyFile or the tokenFile; the check would see it"; }
          { assertion = words == [ ];
            message = "tentaflake.worker.serve.${name}: these flag values cannot be passed through the unit "
              + "(no space, quote, backslash, '$' or backquote): ${concatStringsSep ", " (map (x: "'${x}'") words)}"; }
        ];
      pairs = concatLists (genList (i: genList (j: {
        a = builtins.elemAt names i;
        b = builtins.elemAt names (i + j + 1);
      }) (length names - i - 1)) (length names));
      pairAssertions = map (p:
        let la = workers.${p.a}.label; lb = workers.${p.b}.label; in {
          assertion = !(labelIsValid la && labelIsValid lb) || foldLabel la != foldLabel lb;
          message = "tentaflake.worker.serve: the labels '${la}' ('${p.a}') and '${lb}' ('${p.b}') fold to the "
            + "same worker name '${foldLabel la}'; their capsules and cgroups would share names: give them "
            + "labels that differ in more than case and punctuation";
        }) pairs;
    in concatLists (map one names) ++ pairAssertions;

  # ---- everything ----------------------------------------------------------------------------
  # runcPath: what the unit's PATH gets for a runc worker, which finds runc there (the module's
  # pkgs.runc; serve has no flag naming it).
  evaluate = { workers, runcPath ? [ ] }:
    let
      names = attrNames workers;
      assertions = assertionsOf workers;
      byLabel = f: listToAttrs (map (n: { name = workers.${n}.label; value = f workers.${n}; }) names);
      unit = w: "tentaflake-worker-serve@${w.label}";
      failed = map (x: x.message) (filter (x: !x.assertion) assertions);
      flags = byLabel flagsOf;
      conf = byLabel confOf;
      etc = listToAttrs (concatLists (map (n:
        let w = workers.${n}; in [
          { name = "tentaflake/serve/${w.label}.conf"; value = { text = confOf w; mode = "0600"; }; }
          # symlinks to files outside the store (never copied into it)
          { name = "tentaflake/serve/${w.label}.key"; value = { source = w.keyFile; }; }
          { name = "tentaflake/serve/${w.label}.token"; value = { source = w.tokenFile; }; }
        ]) names));
      services = listToAttrs (map (n:
        let w = workers.${n}; in {
          name = unit w;
          value = {
            overrideStrategy = "asDropin";
            wantedBy = [ "multi-user.target" ];
            restartTriggers = [ (confOf w) ];
            # The originals behind the links are as out of the worker's reach as the links.
            serviceConfig = { InaccessiblePaths = [ "-${w.keyFile}" "-${w.tokenFile}" ]; }
              # The unit's limits for its lanes (systemd/tentaflake-worker-serve@.service.in carries
              # one lane's; docs/validation.md, "Memory").
              // (unitLimits w)
              # --allow-host: the egress proxy needs the host's network (the capsules stay without)
              // (if w.allowHosts != [ ] then networkServiceConfig else { })
              # runc's own work under the unit's sandbox: systemd/controller-runc.conf.in's lines
              # (docs/install.md, "The runc engine"); runsc and the engines keep the narrower unit.
              // (if w.sandbox == "runc" then runcServiceConfig else { });
          } // (if w.sandbox == "runc" then { path = runcPath; } else { });
        }) names);
    in {
      inherit assertions failed flags conf etc services;
    };
in {
  inherit defaults withDefaults evaluate flagsOf foldLabel addressOf labelIsValid imageIsPinned unitLimits;
}
