"""Writes the labelled corpus of the topics' quality tests (tests/data/topics_labelled.jsonl), deterministically:

    python -m tests.make_labelled_corpus

13 known topics of support questions of very different sizes, asked in several styles (short, long, with typos, in
French, with Slack markup: mentions, links, emoji, code), plus outliers (topic null). Each row says whether the
question failed: rates differ by topic, and one small topic (`sso_login`, 18 questions) fails far more than the
rest, which is what a merge into a large topic would hide. Seeded: the same file every run (a test checks it).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).parent / "data" / "topics_labelled.jsonl"
SEED = 46
FAILING_TOPIC = "sso_login"

# topic: (questions, failed, English phrasings, French phrasings, short forms)
TOPICS: dict[str, tuple[int, int, list[str], list[str], list[str]]] = {
    "refunds_annual": (
        60,
        5,
        [
            "How do I get a refund for my annual plan?",
            "Can I get my money back on the yearly subscription?",
            "We paid for a year and want a refund for the unused months",
            "Is the annual plan refundable if we cancel early?",
            "I was charged for the yearly plan by mistake, can you refund it?",
            "What is the refund policy for annual subscriptions?",
            "How long does a refund of the annual plan take to arrive?",
            "Do you refund the remaining months when we downgrade from annual billing?",
        ],
        [
            "Comment obtenir un remboursement de mon abonnement annuel ?",
            "Est-ce que l'abonnement annuel est remboursable ?",
        ],
        ["refund annual plan?", "annual refund", "money back yearly plan"],
    ),
    "sso_login": (
        18,
        13,
        [
            "SSO login fails with an invalid SAML response from Okta",
            "Our team cannot log in with SSO since this morning",
            "SSO login with Okta redirects back to the login page in a loop",
            "Azure AD SSO login says the SAML assertion is not valid",
            "How do I fix the SSO login error 'user not provisioned'?",
            "SSO login with Google Workspace stopped working for our domain",
        ],
        [
            "La connexion SSO (login Okta) échoue avec une réponse SAML invalide",
            "Impossible de faire le login SSO depuis ce matin",
        ],
        ["sso login broken", "okta saml error", "sso sign-in loop"],
    ),
    "password_reset": (
        45,
        4,
        [
            "The password reset link says it expired",
            "I never receive the password reset email",
            "How do I reset my password if I forgot it?",
            "Reset password button does nothing on the sign-in page",
            "Can an admin reset the password of a teammate?",
            "The reset password email lands in spam, is that expected?",
        ],
        [
            "Le lien de réinitialisation du mot de passe a expiré",
            "Je ne reçois pas l'e-mail pour changer mon mot de passe",
        ],
        ["password reset email?", "forgot password", "reset link expired"],
    ),
    "invoices": (
        45,
        3,
        [
            "Where can I download our invoices as PDF?",
            "The invoice is missing our VAT number",
            "How do I change the billing address shown on invoices?",
            "Can you resend last month's invoice to our accountant?",
            "Invoices should show our company name, not my name",
            "Is there a way to get all invoices for the tax year at once?",
        ],
        ["Où télécharger nos factures en PDF ?", "Il manque notre numéro de TVA sur la facture"],
        ["invoice pdf?", "vat number invoice", "download invoices"],
    ),
    "team_seats": (
        40,
        4,
        [
            "How do I add more seats to our team?",
            "We need to remove two seats from the workspace plan",
            "Adding a teammate says we are out of seats",
            "Are guest users counted as paid seats?",
            "How much does one extra seat cost per month?",
            "Can I move a seat from one team member to another?",
        ],
        ["Comment ajouter des places à notre équipe ?", "Les invités comptent-ils comme des places payantes ?"],
        ["add seats", "out of seats", "extra seat price"],
    ),
    "integrations_slack": (
        40,
        3,
        [
            "The Slack integration stopped posting notifications to our channel",
            "How do I connect the app to our Slack workspace?",
            "Slack app install fails with missing scope",
            "Notifications go to the wrong Slack channel after reinstalling",
            "Can I choose which Slack channel receives the alerts?",
            "Slack integration shows disconnected every few days",
        ],
        ["L'intégration Slack ne publie plus les notifications", "Comment connecter l'application à Slack ?"],
        ["slack integration broken", "connect slack", "slack notifications missing"],
    ),
    "api_rate_limits": (
        40,
        4,
        [
            "We keep getting HTTP 429 too many requests from the API",
            "What are the API rate limits per minute?",
            "Can you raise the API rate limit for our account?",
            "API requests are throttled after 100 calls, is that the limit?",
            "How should we back off when the API returns 429?",
            "Does the rate limit apply per API key or per account?",
        ],
        ["L'API renvoie une erreur 429 trop de requêtes", "Quelle est la limite de requêtes de l'API par minute ?"],
        ["api 429", "rate limit api", "api throttled"],
    ),
    "delete_account": (
        35,
        2,
        [
            "How do I delete my account permanently?",
            "Please close our account and delete all our data",
            "Can I delete my user account but keep the team workspace?",
            "What happens to our data after account deletion?",
            "Delete account button is greyed out in settings",
        ],
        [
            "Comment supprimer définitivement mon compte ?",
            "Que deviennent nos données après la suppression du compte ?",
        ],
        ["delete account", "close my account", "account deletion"],
    ),
    "data_export": (
        35,
        3,
        [
            "How can I export all our data to CSV?",
            "The export to CSV times out for large projects",
            "Is there an API to export our project data?",
            "Export file is empty when I download it",
            "Can we schedule a weekly data export?",
        ],
        ["Comment exporter toutes nos données en CSV ?", "L'export CSV est vide quand je le télécharge"],
        ["export csv", "data export empty", "export times out"],
    ),
    "mobile_app_crash": (
        40,
        5,
        [
            "The mobile app crashes when I open it on Android",
            "iPhone app freezes after the latest update",
            "App closes by itself when I upload a photo from my phone",
            "Mobile app crashes on startup since version 5.2",
            "The iOS app is stuck on the loading screen",
            "Android app keeps crashing when switching accounts",
        ],
        ["L'application mobile plante au démarrage sur Android", "L'appli iPhone se fige après la mise à jour"],
        ["app crash android", "ios app freezes", "mobile app crashing"],
    ),
    "webhooks": (
        30,
        3,
        [
            "Our webhook endpoint never receives the events",
            "How do I verify the webhook signature?",
            "Webhooks are delivered twice, how do we deduplicate them?",
            "Which webhook events are sent when an order is paid?",
            "Webhook deliveries fail with a timeout, do you retry?",
        ],
        ["Notre webhook ne reçoit aucun événement", "Comment vérifier la signature des webhooks ?"],
        ["webhook not firing", "webhook signature", "webhook retries"],
    ),
    "two_factor": (
        30,
        2,
        [
            "I lost my phone and cannot pass two-factor authentication",
            "How do I enable 2FA for the whole team?",
            "The authenticator code is always rejected",
            "Where are the two-factor backup codes?",
            "Can an admin reset two-factor for a teammate who lost their device?",
        ],
        ["J'ai perdu mon téléphone et je ne peux plus passer la double authentification", "Comment activer la 2FA ?"],
        ["2fa code rejected", "lost 2fa device", "enable two-factor"],
    ),
    "notifications_email": (
        30,
        2,
        [
            "How do I stop the daily email notifications?",
            "We get too many notification emails, can we get a digest instead?",
            "Email notifications stopped arriving for comments",
            "Can I unsubscribe from marketing emails but keep the alerts?",
            "Notification emails arrive hours late",
        ],
        ["Comment arrêter les notifications par e-mail ?", "Les e-mails de notification arrivent en retard"],
        ["stop email notifications", "too many emails", "notification emails late"],
    ),
}

OUTLIERS = [
    "Is there a podcast from your team?",
    "Who designed your logo?",
    "Are you hiring engineers in Lisbon?",
    "What's the weather like at your office today?",
    "Do you have a referral program for students?",
    "Can I bring my dog to the user conference?",
    "Which coffee do you serve at the meetup?",
    "Is the founder speaking at the keynote next month?",
    "Do you sponsor open source projects?",
    "What music do you play in the product videos?",
    "Can I buy a t-shirt with your mascot?",
    "Is there a dark theme for the marketing site?",
    "How many people work at your company?",
    "Where is your headquarters located?",
    "Vous avez des stickers à envoyer ?",
    "Do you have a YouTube channel with tutorials for cooking?",
    "Can I volunteer to translate your blog into Polish?",
    "Which charity did you donate to last year?",
    "Is the office closed for the holidays?",
    "What was the name of the previous version of the product?",
]

OPENERS = [
    "Hi team,",
    "Hello, quick question from our ops lead:",
    "Good morning!",
    "Sorry to bother you again,",
    "Hey folks, a customer escalated this:",
]
CONTEXTS = [
    "We are a team of forty on the business plan and this blocks our work this week.",
    "I already looked through the help centre articles and could not find anything that matches.",
    "This started after we changed a few settings yesterday afternoon, not sure if related.",
    "Our manager asked me to sort it out before the end of the quarter.",
    "It happens for several people in different countries, on different browsers.",
]
CLOSERS = ["Thanks a lot!", "Any pointer is welcome.", "Cheers.", "Thank you in advance.", "Appreciate the help."]
EMOJI = [":pray:", ":sweat_smile:", ":rotating_light:", ":eyes:", ":thinking_face:"]
STYLES = ["plain", "plain", "short", "long", "typo", "slack", "plain", "french", "long", "typo", "slack", "short"]


def _typos(text: str, rng: random.Random) -> str:
    """One or two words with two neighbouring letters swapped, and a letter dropped elsewhere."""
    words = text.split()
    candidates = [i for i, w in enumerate(words) if len(w) > 5 and w.isalpha()]
    for i in rng.sample(candidates, min(len(candidates), 2)):
        word = words[i]
        at = rng.randrange(1, len(word) - 2)
        words[i] = word[:at] + word[at + 1] + word[at] + word[at + 2 :]
    return " ".join(words).lower()


def _slack(text: str, rng: random.Random) -> str:
    user = "U0" + "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(8))
    marks = [
        f"<@{user}> {text} {rng.choice(EMOJI)}",
        f"*{text}* {rng.choice(EMOJI)}",
        f"{text} see <https://example.com/t/{rng.randrange(1000, 9999)}|this screenshot>",
        f"> {text}\n<@{user}> can you check?",
        f"{text} `error code {rng.randrange(100, 999)}`",
    ]
    return rng.choice(marks)


def _styled(style: str, english: list[str], french: list[str], short: list[str], rng: random.Random) -> str:
    base = rng.choice(english)
    if style == "short":
        return rng.choice(short)
    if style == "long":
        # The context is the same few sentences across topics: what a long message shares with others is noise.
        return f"{rng.choice(OPENERS)} {base} {rng.choice(CONTEXTS)} {base.split()[-1]}? {rng.choice(CLOSERS)}"
    if style == "typo":
        return _typos(base, rng)
    if style == "slack":
        return _slack(base, rng)
    if style == "french":
        return rng.choice(french)
    return base


def rows() -> list[dict]:
    rng = random.Random(SEED)
    out = []
    for topic, (count, failed, english, french, short) in TOPICS.items():
        failing = set(rng.sample(range(count), failed))
        for i in range(count):
            text = _styled(STYLES[i % len(STYLES)], english, french, short, rng)
            out.append({"question": text, "topic": topic, "failed": i in failing})
    out += [{"question": text, "topic": None, "failed": i % 4 == 0} for i, text in enumerate(OUTLIERS)]
    rng.shuffle(out)
    return out


def text() -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows())


if __name__ == "__main__":
    OUT.write_text(text(), encoding="utf-8")
    print(f"wrote {len(rows())} questions to {OUT}")
