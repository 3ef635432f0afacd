"""Sign-in throttling (django-axes): 5 wrong passwords for one username from one address lock
that pair out for 15 minutes, the right password included; a success clears the count."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

pytestmark = pytest.mark.django_db

LOGIN = reverse("login")


@pytest.fixture
def ann(db) -> User:
    return User.objects.create_user("ann", password="right-password")


def sign_in(client: Client, password: str, *, username: str = "ann", url: str = LOGIN):
    return client.post(url, {"username": username, "password": password})


def is_signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_five_wrong_passwords_then_the_right_one_is_refused(client, ann):
    for _ in range(4):
        assert sign_in(client, "guess").status_code == 200  # the form again, with its error
    fifth = sign_in(client, "guess")
    right = sign_in(client, "right-password")

    assert fifth.status_code == right.status_code == 429
    assert "Too many failed sign-ins" in right.content.decode()
    assert not is_signed_in(client)
    assert client.get(reverse("dashboard")).status_code == 302  # still sent to sign in
    attempt = AccessAttempt.objects.get(username="ann", ip_address="127.0.0.1")
    assert attempt.failures_since_start >= 5


def test_a_success_resets_the_count(client, ann):
    for _ in range(4):
        sign_in(client, "guess")
    assert sign_in(client, "right-password").status_code == 302
    client.post(reverse("logout"))

    for _ in range(4):
        sign_in(client, "guess")
    assert sign_in(client, "right-password").status_code == 302
    assert is_signed_in(client)


def test_the_lock_holds_one_username_from_one_address(ann):
    User.objects.create_user("bob", password="bob-password")
    here, elsewhere = Client(REMOTE_ADDR="127.0.0.1"), Client(REMOTE_ADDR="127.0.0.2")
    for _ in range(5):
        sign_in(here, "guess")

    assert sign_in(here, "right-password").status_code == 429
    assert sign_in(here, "bob-password", username="bob").status_code == 302
    assert sign_in(elsewhere, "right-password").status_code == 302


def test_the_lock_lifts_after_15_minutes(client, ann):
    for _ in range(5):
        sign_in(client, "guess")
    assert sign_in(client, "right-password").status_code == 429

    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))

    assert sign_in(client, "right-password").status_code == 302
    assert is_signed_in(client)


def test_the_admin_sign_in_is_throttled_too(client, ann):
    ann.is_staff = True
    ann.save()
    url = reverse("admin:login")
    for _ in range(5):
        sign_in(client, "guess", url=url)

    assert sign_in(client, "right-password", url=url).status_code == 429
    assert not is_signed_in(client)
