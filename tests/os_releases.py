"""The os-release (ID, VERSION_ID, ID_LIKE, as each OS ships /etc/os-release) of the node OSes the driver tests plan
for, by a name of the OS family and release."""

OS = {
    "Debian-12": {"id": "debian", "version_id": "12"},
    "Debian-13": {"id": "debian", "version_id": "13"},
    "Ubuntu-20": {"id": "ubuntu", "version_id": "20.04", "id_like": "debian"},
    "Ubuntu-22": {"id": "ubuntu", "version_id": "22.04", "id_like": "debian"},
    "Ubuntu-24": {"id": "ubuntu", "version_id": "24.04", "id_like": "debian"},
    "Ubuntu-26": {"id": "ubuntu", "version_id": "26.04", "id_like": "debian"},
    "RedHat-7": {"id": "ol", "version_id": "7.9", "id_like": "fedora"},
    "RedHat-8": {"id": "rocky", "version_id": "8.10", "id_like": "rhel centos fedora"},
    "RedHat-9": {"id": "rhel", "version_id": "9.4", "id_like": "fedora"},
    "RedHat-10": {"id": "almalinux", "version_id": "10.0", "id_like": "rhel centos fedora"},
    "Rocky-10": {"id": "rocky", "version_id": "10.0", "id_like": "rhel centos fedora"},
    "CentOS-7": {"id": "centos", "version_id": "7", "id_like": "rhel fedora"},
}
