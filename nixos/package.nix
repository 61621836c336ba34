# tentaflake-worker built with its own Makefile (`make install PREFIX=$out`), which also installs
# the systemd units the NixOS module uses. The in-capsule init must be a static binary (it runs
# inside any root filesystem), so it comes from ./capsule-init.nix built with pkgsStatic and is
# placed where the worker looks for it ($out/libexec/tentaflake-worker).
#
# Not built on the project's own machines (Debian, no nixpkgs there): `nix build` is the check.
{ lib, stdenv, pkgsStatic, pkg-config, jansson, libsodium, libseccomp, libarchive, systemd
, curl, openssl, src ? null }:
let
  version = builtins.head
    (builtins.match ".*VERSION +:= +([0-9.]+).*" (builtins.readFile ../Makefile));
  buildDirs = [ "build" "build-asan" "build-fuzz" ];
  source = if src != null then src else lib.cleanSourceWith {
    src = lib.cleanSource ../.;
    filter = path: type: !(type == "directory" && builtins.elem (baseNameOf path) buildDirs);
  };
  init = pkgsStatic.callPackage ./capsule-init.nix { src = source; inherit version; };
in stdenv.mkDerivation {
  pname = "tentaflake-worker";
  inherit version;
  src = source;

  nativeBuildInputs = [ pkg-config ];
  buildInputs = [ jansson libsodium libseccomp libarchive systemd curl openssl ];

  # INIT_SRC empty: the Makefile then neither builds nor installs the init (it would need
  # static glibc archives of libarchive's dependencies); postInstall brings the static one.
  # SOCKET_PROXYD: the serve worker's proxy unit runs it (systemd/tentaflake-worker-serve-proxy@.service.in).
  makeFlags = [ "PREFIX=${placeholder "out"}" "INIT_SRC="
    "SOCKET_PROXYD=${systemd}/lib/systemd/systemd-socket-proxyd" ];
  enableParallelBuilding = true;

  postInstall = ''
    install -D -m 0755 ${init}/libexec/tentaflake-worker/tentaflake-capsule-init \
      $out/libexec/tentaflake-worker/tentaflake-capsule-init
  '';

  passthru = { inherit init; };

  meta = {
    description = "Runs an AI agent's untrusted commands in disposable gVisor capsules";
    license = lib.licenses.mit;
    platforms = lib.platforms.linux;
    mainProgram = "tentaflake-worker";
  };
}
