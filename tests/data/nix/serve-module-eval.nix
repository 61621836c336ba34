# nixos/module.nix evaluated by nixpkgs' lib.evalModules on the serve workers of
# ./serve-cases.nix (the NixOS options the module sets are stubs, as in ./module-eval.nix). For
# tests/unit/test-nix-serve.sh when NIXPKGS_LIB is set:
#   nix-instantiate --eval --strict --json tests/data/nix/serve-module-eval.nix \
#     --arg libPath "$NIXPKGS_LIB" [--argstr case NAME]
{ libPath, case ? "good" }:
let
  lib = import libPath;
  inherit (lib) mkOption types;
  cases = import ./serve-cases.nix;
  package = { type = "derivation"; name = "tentaflake-worker-0.1.0";
              outPath = "/nix/store/00000000000000000000000000000000-tentaflake-worker-0.1.0"; };
  pkgs = { gvisor = "/nix/store/11111111111111111111111111111111-gvisor";
          runc = "/nix/store/22222222222222222222222222222222-runc"; callPackage = _: _: package; };
  stubs = {
    options = {
      assertions = mkOption { type = types.listOf types.unspecified; default = [ ]; };
      environment.etc = mkOption { type = types.attrsOf (types.attrsOf types.anything); default = { }; };
      environment.systemPackages = mkOption { type = types.listOf types.package; default = [ ]; };
      users.groups = mkOption { type = types.attrsOf types.anything; default = { }; };
      systemd.tmpfiles.rules = mkOption { type = types.listOf types.str; default = [ ]; };
      systemd.packages = mkOption { type = types.listOf types.package; default = [ ]; };
      systemd.services = mkOption { type = types.attrsOf (types.attrsOf types.anything); default = { }; };
      systemd.paths = mkOption { type = types.attrsOf (types.attrsOf types.anything); default = { }; };
      systemd.timers = mkOption { type = types.attrsOf (types.attrsOf types.anything); default = { }; };
    };
  };
  workers = if case == "good" then cases.good else cases.bad.${case}.workers;
  c = (lib.evalModules {
    modules = [
      ../../../nixos/module.nix
      stubs
      {
        _module.args.pkgs = pkgs;
        tentaflake.worker.serve = builtins.mapAttrs (_: w: { enable = true; } // w) workers;
      }
    ];
  }).config;
in {
  failed = map (x: x.message) (builtins.filter (x: !x.assertion) c.assertions);
  etc = builtins.mapAttrs (_: v: v.text or v.source) c.environment.etc;
  services = c.systemd.services;
  packages = map (p: p.outPath) c.systemd.packages;
}
