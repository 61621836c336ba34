# nixos/module.nix evaluated by nixpkgs' own lib.evalModules (not NixOS: the few NixOS options
# the module sets are declared here as loose stubs), on the agents of ./cases.nix. For
# tests/unit/test-nix-module.sh:
#   nix-instantiate --eval --strict --json tests/data/nix/module-eval.nix \
#     --arg libPath "$NIXPKGS_LIB" [--argstr case NAME] [--arg extra '{ ... }']
# case "good" (default) or a name in cases.bad; extra: more option values for the agent "a"
# of the bad-option tests (a misspelt option name, a wrong type).
{ libPath, case ? "good", extra ? null }:
let
  lib = import libPath;
  inherit (lib) mkOption types;
  cases = import ./cases.nix;

  package = { type = "derivation"; name = "tentaflake-worker-0.1.0"; outPath = cases.package; };
  gvisor = "/nix/store/11111111111111111111111111111111-gvisor";
  # A stub pkgs with the attribute shape the module uses: derivation-like sets whose outPath is
  # a fake store path; the builders record what they were given (stub) for the test to check
  # or run (the merge script with jq, on a fake closure).
  drv = name: extra: { type = "derivation"; inherit name; outPath = "/nix/store/${hashOf name}-${name}"; } // extra;
  hashOf = name: builtins.substring 0 32 (builtins.hashString "sha256" name);
  toolNames = [ "bash" "coreutils" "findutils" "gnugrep" "gnused" "gawk" "gnutar" "gzip" "gnumake"
                "gcc" "binutils" "pkg-config" "python3" "git" ];
  pkgs = builtins.listToAttrs (map (n: { name = n; value = drv n { }; })
      (toolNames ++ [ "jq" "docker" "podman" "runc" ])) // {
    gvisor = gvisor;
    callPackage = _: _: package;
    buildEnv = a: drv a.name { stub = { inherit (a) pathsToLink; paths = map (p: p.name) a.paths; }; };
    closureInfo = a: drv "closure-info" { stub = { rootPaths = map toString a.rootPaths; }; };
    runCommand = name: env: script: drv name { stub = { inherit name script; base = env.base;
      closure = env.closure; passAsFile = env.passAsFile; tools = map (p: p.name) env.nativeBuildInputs; }; };
    writeShellScript = name: text: drv name { stub = { inherit text; }; };
  };

  stubs = {
    options = {
      assertions = mkOption { type = types.listOf types.unspecified; default = [ ]; };
      environment.etc = mkOption { type = types.attrsOf (types.attrsOf types.anything); default = { }; };
      environment.systemPackages = mkOption { type = types.listOf types.package; default = [ ]; };
      users.groups = mkOption {
        type = types.attrsOf (types.submodule {
          options.gid = mkOption { type = types.nullOr types.int; default = null; };
        });
        default = { };
      };
      systemd.tmpfiles.rules = mkOption { type = types.listOf types.str; default = [ ]; };
      systemd.packages = mkOption { type = types.listOf types.package; default = [ ]; };
      systemd.services = mkOption { type = types.attrsOf (types.attrsOf types.anything); default = { }; };
      systemd.paths = mkOption { type = types.attrsOf (types.attrsOf types.anything); default = { }; };
      systemd.timers = mkOption { type = types.attrsOf (types.attrsOf types.anything); default = { }; };
    };
  };

  # What the module computes itself from `toolchain` is not an option: leave it out.
  asOptions = builtins.mapAttrs (_: a: removeAttrs a [ "toolchainEnv" "toolchainClosure" ]);
  agents = asOptions (
    if extra != null then { a = cases.good.hermes-coding // extra; }
    else if case == "good" then cases.good
    else cases.bad.${case}.agents);

  evaluated = lib.evalModules {
    modules = [
      ../../../nixos/module.nix
      stubs
      {
        _module.args.pkgs = pkgs;
        users.groups = cases.groups;
        tentaflake.worker.agents = builtins.mapAttrs (_: a: { enable = true; } // a) agents;
      }
    ];
  };
  c = evaluated.config;
in {
  inherit gvisor;
  failed = map (x: x.message) (builtins.filter (x: !x.assertion) c.assertions);
  # A config written at evaluation, or (toolchain) the base config the build step starts from.
  configs = lib.mapAttrs' (n: v: {
    name = lib.removeSuffix ".json" (lib.removePrefix "tentaflake/workers/" n);
    value = builtins.fromJSON (if v ? text then v.text else v.source.stub.base);
  }) c.environment.etc;
  builds = lib.mapAttrs' (n: v: {
    name = lib.removeSuffix ".json" (lib.removePrefix "tentaflake/workers/" n);
    value = v.source.stub;
  }) (lib.filterAttrs (_: v: v ? source) c.environment.etc);
  toolchainEnvs = builtins.mapAttrs (n: _: (drv "tentaflake-capsule-toolchain-${n}" { }).outPath) agents;
  inherit toolNames;
  docker = pkgs.docker.outPath;
  toolchains = builtins.mapAttrs (_: a: map (p: p.name) a.toolchain) c.tentaflake.worker.agents;
  timers = c.systemd.timers;
  groups = builtins.mapAttrs (_: g: g.gid) c.users.groups;
  tmpfiles = c.systemd.tmpfiles.rules;
  services = c.systemd.services;
  paths = c.systemd.paths;
  packages = map (p: p.outPath) c.systemd.packages;
}
