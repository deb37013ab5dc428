"""Test doubles that behave like the real services DocPilot talks to."""
