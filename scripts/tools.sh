#!/usr/bin/env bash
# The Debian tools the tests check Tessera's DICOM output against: dcmtk (dsrdump, dsr2xml),
# dicom3tools (dciodvfy), the converters whose NIfTI (dcm2niix) and MetaImage (plastimatch) files
# the volume readers are checked against, a one-node Slurm for the job-array test (slurm-wlm,
# munge; the test configures and starts its own daemons), and the PACS the DICOMweb tests talk to (Orthanc with its DICOMweb
# plugin; the tests start their own on loopback, nothing runs as a service), and openssl (a
# certificate no system trusts, for the HTTPS refusal test). Installs what is missing when it can (root, or sudo without a
# password); otherwise says what to install, and the tests that need them say SKIPPED (in CI
# they fail instead). Re-running it does nothing once everything is in place.
set -euo pipefail
say() { printf 'tools: %s\n' "$*" >&2; }

declare -A package_of=([dsrdump]=dcmtk [dsr2xml]=dcmtk [dcmconv]=dcmtk [dciodvfy]=dicom3tools [Orthanc]=orthanc [openssl]=openssl
  [dcm2niix]=dcm2niix [plastimatch]=plastimatch [slurmctld]=slurm-wlm [munged]=munge)
missing=()
for tool in "${!package_of[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${package_of[$tool]}")
done
[ -f /usr/share/orthanc/plugins/libOrthancDicomWeb.so ] || missing+=(orthanc-dicomweb)
[ "${#missing[@]}" = 0 ] && exit 0
mapfile -t packages < <(printf '%s\n' "${missing[@]}" | sort -u)

"$(dirname "${BASH_SOURCE[0]}")/apt_install.sh" tools "${packages[@]}"
