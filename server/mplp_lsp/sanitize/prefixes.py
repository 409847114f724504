"""Credentials that announce themselves: a vendor's fixed prefix, then a random body.

One row per format: (kind, prefix, body). :mod:`~mplp_lsp.sanitize.redact` turns each row
into a rule that finds the prefix where no letter or digit precedes it (``conf_hf_...`` is a
token after a separator, ``xhf_...`` is not) and the body up to where no letter or digit
follows. The formats with structure of their own (AWS, GitHub, GitLab, Slack, Stripe,
Google, OpenAI, npm, PyPI, private key blocks, JWTs) have their own rules there.
"""

from __future__ import annotations

from typing import Final

__all__ = ["PREFIXED"]

# The bodies are the vendors' documented shapes, kept a little loose (length ranges) so a
# format that grows by a few characters is still found.
PREFIXED: Final[tuple[tuple[str, str, str], ...]] = (
    ("huggingface_token", "hf_", r"[A-Za-z0-9]{30,40}"),
    ("sendgrid_key", "SG.", r"[\w\-]{16,32}\.[\w\-]{16,64}"),
    ("digitalocean_token", "do", r"[opr]_v1_[a-f0-9]{64}"),
    ("age_secret_key", "AGE-SECRET-KEY-1", r"[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("twilio_key", "SK", r"[0-9a-fA-F]{32}"),
    ("mailgun_key", "key-", r"[0-9a-f]{32}"),
    ("shopify_token", "shp", r"(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"),
    ("square_token", "sq0", r"(?:atp|csp)-[\w\-]{22,43}"),
    ("databricks_token", "dapi", r"[a-f0-9]{32}(?:-\d)?"),
    ("linear_key", "lin_api_", r"[A-Za-z0-9]{40}"),
    ("notion_token", "ntn_", r"[A-Za-z0-9]{40,50}"),
    ("notion_token", "secret_", r"[A-Za-z0-9]{43}"),
    ("stripe_webhook_secret", "whsec_", r"[A-Za-z0-9+/]{24,}={0,2}"),
    ("google_oauth_token", "ya29.", r"[\w\-]{20,}"),
    ("google_oauth_secret", "GOCSPX-", r"[\w\-]{24,32}"),
    ("atlassian_token", "ATATT", r"[\w\-=]{30,}"),
    ("doppler_token", "dp.", r"(?:st|pt|sa|ct|scim|audit)\.[\w\-]{40,}"),
    ("pulumi_token", "pul-", r"[a-f0-9]{40}"),
    ("rubygems_key", "rubygems_", r"[a-f0-9]{48}"),
    ("groq_key", "gsk_", r"[A-Za-z0-9]{40,}"),
    ("replicate_token", "r8_", r"[A-Za-z0-9]{37}"),
    ("perplexity_key", "pplx-", r"[A-Za-z0-9]{40,}"),
    ("figma_token", "figd_", r"[\w\-]{30,}"),
    ("grafana_token", "glc_", r"[A-Za-z0-9+/]{32,}={0,2}"),
    ("grafana_token", "glsa_", r"[A-Za-z0-9]{32}_[a-f0-9]{8}"),
    ("sentry_token", "sntry", r"[su]_[\w+/=\-]{40,}"),
    ("vault_token", "hv", r"[sbr]\.[\w\-]{24,}"),
    ("postman_key", "PMAK-", r"[a-f0-9]{24}-[a-f0-9]{34}"),
    ("dynatrace_token", "dt0c01.", r"[A-Z0-9]{24}\.[A-Z0-9]{64}"),
    ("newrelic_key", "NR", r"(?:AK|II|JS|RA)-[A-Za-z0-9]{27,32}"),
    ("flyio_token", "fo1_", r"[\w\-]{40,}"),
    ("flyio_token", "fm", r"[12]_[\w+/=\-]{40,}"),
    ("supabase_token", "sbp_", r"[a-f0-9]{40}"),
    ("alibaba_key", "LTAI", r"[A-Za-z0-9]{12,20}"),
    ("tencent_key", "AKID", r"[A-Za-z0-9]{13,40}"),
    ("slack_token", "xapp-", r"\d-[A-Z0-9]+-\d+-[a-f0-9]{20,}"),
    ("jfrog_key", "AKCp", r"[A-Za-z0-9]{60,}"),
    ("gitlab_token", "GR1348941", r"[\w\-]{20,}"),
    ("docker_hub_token", "dckr_pat_", r"[\w\-]{24,}"),
)
