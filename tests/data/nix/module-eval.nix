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
  pkgs = { gvisor = gvisor; callPackage = _: _: package; };

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
    };
  };

  agents =
    if extra != null then { a = cases.good.hermes-coding // extra; }
    else if case == "good" then cases.good
    else cases.bad.${case}.agents;

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
  configs = lib.mapAttrs' (n: v: {
    name = lib.removeSuffix ".json" (lib.removePrefix "tentaflake/workers/" n);
    value = builtins.fromJSON v.text;
  }) c.environment.etc;
  groups = builtins.mapAttrs (_: g: g.gid) c.users.groups;
  tmpfiles = c.systemd.tmpfiles.rules;
  services = c.systemd.services;
  paths = c.systemd.paths;
  packages = map (p: p.outPath) c.systemd.packages;
}
