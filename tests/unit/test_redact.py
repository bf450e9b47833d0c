"""Secret-bearing vars are recognised by name, their values are taken out of any text, and secret-looking
assignments are masked where the value is not known."""

from __future__ import annotations

import pytest

from fabricproof.redact import MASK, Redactor, assignments, is_secret_var, secret_values


@pytest.mark.parametrize("name", ["ansible_password", "ansible_ssh_pass", "ansible_become_password",
                                  "ansible_sudo_pass", "ansible_ssh_private_key_passphrase", "bmc_password",
                                  "vault_token", "api_secret", "ipmi_credentials", "ANSIBLE_BECOME_PASS"])
def test_secret_bearing_var_names(name):
    assert is_secret_var(name)


@pytest.mark.parametrize("name", ["ansible_host", "ansible_port", "ansible_user", "ansible_ssh_common_args",
                                  "ansible_ssh_private_key_file", "ansible_become_method"])
def test_ordinary_var_names(name):
    assert not is_secret_var(name)


def test_values_of_secret_vars_are_taken_out_longest_first():
    values = secret_values([{"ansible_password": "hunter2-long", "ansible_user": "root"},
                            {"bmc_password": "hunter2", "ansible_become_pass": "no"}])
    assert values == {"hunter2-long", "hunter2"}  # "no" is too short to mask without blanking words
    redact = Redactor(values)
    assert redact("auth with hunter2-long failed; bmc hunter2") == f"auth with {MASK} failed; bmc {MASK}"


def test_secret_looking_assignments_are_masked_when_the_value_is_unknown():
    assert assignments("ansible_password=abc123 ansible_host=10.0.0.1") == \
        f"ansible_password={MASK} ansible_host=10.0.0.1"
    assert assignments('{"ansible_become_pass": "x y z", "user": "a"}') == \
        f'{{"ansible_become_pass": {MASK}, "user": "a"}}'
    assert assignments("bmc_token: 'q'") == f"bmc_token: {MASK}"
    assert assignments("nothing secret here: 42") == "nothing secret here: 42"
