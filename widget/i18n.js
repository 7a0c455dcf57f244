// Every string the widget shows, per language. A page picks one with data-lang (default:
// the page's <html lang>, then the browser's), and may override any string with the
// `strings` option of mount() or a JSON object in data-strings. {name} is a placeholder.

export const STRINGS = {
  en: {
    chatLabel: "{title} chat",
    conversation: "Conversation",
    connecting: "Connecting…",
    connected: "Connected",
    lost: "Connection lost — reconnecting…",
    offline: "Offline — messages will be sent when you are back",
    yourMessage: "Your message",
    placeholder: "Type your message…",
    placeholderWaiting: "Answer the question above first",
    send: "Send",
    newConversation: "New conversation",
    openChat: "Open chat",
    closeChat: "Close chat",
    unread: "{count} unread",
    newMessages: "New messages",
    working: "The agent is typing…",
    slow: "Still working on it…",
    recovering: "The agent was interrupted — picking up where it stopped…",
    waiting: "The agent is waiting for your answer.",
    expiredTitle: "This conversation has expired.",
    expiredBody: "Conversations are kept for a while after their last message; this one is gone.",
    startNew: "Start a new conversation",
    refused: "This chat is not available on this site.",
    queued: "Waiting to send…",
    queuedOffline: "Will be sent when the connection is back.",
    queuedBusy: "Will be sent when the agent has finished.",
    sending: "Sending…",
    notSent: "Not sent: {reason}",
    retry: "Retry",
    edit: "Edit",
    backInBox: "Not sent: {reason} (it is back in the message box)",
    you: "You",
    agent: "Agent",
    questionFallback: "The agent has a question",
    yes: "Yes",
    no: "No",
    sendAnswer: "Send answer",
    yourAnswer: "Your answer",
    wholeNumber: "Enter a whole number.",
    answered: "Answered.",
    youAnswered: "You answered: {answer}",
    questionExpired: "This question expired — the agent continued without your answer.",
    questionWithdrawn: "This question was withdrawn.",
    questionClosed: "No answer needed any more — the agent went on without it.",
    notAccepted: "Not accepted: {reason}",
    tryAgain: "Not connected — try again in a moment.",
    failed: "Sorry — something went wrong on our side.",
    stopped: "The conversation was stopped.",
    // the server's error codes, said for a visitor (never the raw API text)
    err_busy: "the agent is still answering your previous message",
    err_message_too_large: "the message is too long",
    err_invalid_message: "the message is empty",
    err_rate_limited: "too many messages at once — wait a moment",
    err_unknown_agent: "this chat is not set up for that agent",
    err_no_chat_workflow: "this chat is not set up yet",
    err_invalid_payload: "that answer does not fit the question — check it and send it again",
    err_payload_too_large: "that answer is too long — shorten it and send it again",
    err_frame_too_large: "that is too long to send — shorten it and send it again",
    err_hook_already_answered: "the question was already answered",
    err_hook_expired: "the question has expired",
    err_hook_cancelled: "the question was withdrawn",
    err_hook_closed: "the question was closed — the agent went on without it",
    err_run_finished: "the conversation moved on",
    err_store_unavailable: "the service is briefly unavailable — try again",
    err_unknown: "something went wrong ({code})",
  },
  fr: {
    chatLabel: "Discussion {title}",
    conversation: "Conversation",
    connecting: "Connexion…",
    connected: "Connecté",
    lost: "Connexion perdue — reconnexion…",
    offline: "Hors ligne — vos messages partiront au retour de la connexion",
    yourMessage: "Votre message",
    placeholder: "Écrivez votre message…",
    placeholderWaiting: "Répondez d’abord à la question ci-dessus",
    send: "Envoyer",
    newConversation: "Nouvelle conversation",
    openChat: "Ouvrir la discussion",
    closeChat: "Fermer la discussion",
    unread: "{count} non lu(s)",
    newMessages: "Nouveaux messages",
    working: "L’agent écrit…",
    slow: "Toujours en cours…",
    recovering: "L’agent a été interrompu — il reprend où il s’était arrêté…",
    waiting: "L’agent attend votre réponse.",
    expiredTitle: "Cette conversation a expiré.",
    expiredBody: "Les conversations sont conservées un temps après leur dernier message ; celle-ci ne l’est plus.",
    startNew: "Commencer une nouvelle conversation",
    refused: "Cette discussion n’est pas disponible sur ce site.",
    queued: "En attente d’envoi…",
    queuedOffline: "Sera envoyé au retour de la connexion.",
    queuedBusy: "Sera envoyé quand l’agent aura terminé.",
    sending: "Envoi…",
    notSent: "Non envoyé : {reason}",
    retry: "Réessayer",
    edit: "Modifier",
    backInBox: "Non envoyé : {reason} (le texte est de retour dans la zone de message)",
    you: "Vous",
    agent: "Agent",
    questionFallback: "L’agent a une question",
    yes: "Oui",
    no: "Non",
    sendAnswer: "Envoyer la réponse",
    yourAnswer: "Votre réponse",
    wholeNumber: "Saisissez un nombre entier.",
    answered: "Répondu.",
    youAnswered: "Vous avez répondu : {answer}",
    questionExpired: "Cette question a expiré — l’agent a continué sans votre réponse.",
    questionWithdrawn: "Cette question a été retirée.",
    questionClosed: "Plus besoin de réponse — l’agent a continué sans elle.",
    notAccepted: "Refusé : {reason}",
    tryAgain: "Pas de connexion — réessayez dans un instant.",
    failed: "Désolé — un problème est survenu de notre côté.",
    stopped: "La conversation a été arrêtée.",
    err_busy: "l’agent répond encore à votre message précédent",
    err_message_too_large: "le message est trop long",
    err_invalid_message: "le message est vide",
    err_rate_limited: "trop de messages à la fois — patientez un instant",
    err_unknown_agent: "cette discussion n’est pas configurée pour cet agent",
    err_no_chat_workflow: "cette discussion n’est pas encore configurée",
    err_invalid_payload: "cette réponse ne correspond pas à la question — vérifiez-la et renvoyez-la",
    err_payload_too_large: "cette réponse est trop longue — raccourcissez-la et renvoyez-la",
    err_frame_too_large: "c’est trop long pour être envoyé — raccourcissez et renvoyez",
    err_hook_already_answered: "la question a déjà reçu une réponse",
    err_hook_expired: "la question a expiré",
    err_hook_cancelled: "la question a été retirée",
    err_hook_closed: "la question a été close — l’agent a continué sans elle",
    err_run_finished: "la conversation est passée à autre chose",
    err_store_unavailable: "le service est brièvement indisponible — réessayez",
    err_unknown: "un problème est survenu ({code})",
  },
};

// The answer page of a signed link (/a/<link>, answer-page.js): its own strings, on top of
// the widget's (its form is the widget's, with the widget's words). What the server writes
// on it (server/links.py: why a link cannot be used, REFUSALS, and why an answer was not
// recorded, ANSWER_ERRORS) is English there and shown as it is; here are its other
// languages, by the server's reason or error code.
export const ANSWER_PAGE = {
  en: {
    pageTitle: "A question for you",
    pageThanks: "Thank you — your answer was recorded.",
    pageUnreachable: "The server could not be reached; try again.",
    pageNotRecorded: "Your answer was not recorded. Send it again in a moment.",
    pageAnswerBefore: "Please answer before {date}.",
  },
  fr: {
    pageTitle: "Une question pour vous",
    pageThanks: "Merci — votre réponse a été enregistrée.",
    pageUnreachable: "Le serveur est injoignable ; réessayez.",
    pageNotRecorded: "Votre réponse n’a pas été enregistrée. Renvoyez-la dans un instant.",
    pageAnswerBefore: "Merci de répondre avant le {date}.",
    title_not_configured: "Les liens de réponse sont désactivés",
    refusal_not_configured:
      "Ce serveur n’accepte pas de réponses par lien. " +
      "Demandez à la personne qui vous a envoyé le lien comment répondre autrement.",
    title_malformed: "Ce lien n’est pas valide",
    refusal_malformed:
      "Ce lien n’est pas valide : il a peut-être été copié en partie seulement. " +
      "Copiez le lien entier depuis le message reçu, ou demandez un nouveau lien.",
    title_bad_signature: "Ce lien n’est pas valide",
    refusal_bad_signature:
      "Ce lien n’est pas valide : il a été modifié ou mal recopié. " +
      "Rien n’a été changé. Copiez à nouveau le lien entier, ou demandez un nouveau lien.",
    title_unknown_key: "Ce lien n’est plus valide",
    refusal_unknown_key:
      "Ce lien n’est plus valide : il a été créé avec une clé que ce serveur n’accepte " +
      "plus. Rien n’a été changé. Demandez un nouveau lien.",
    title_expired: "Cette question a expiré",
    refusal_expired:
      "Cette question a expiré : le délai pour y répondre est passé. " +
      "Si elle compte encore, demandez à la personne qui l’a envoyée de la poser à nouveau.",
    title_received: "Déjà répondu",
    refusal_received:
      "Cette question a déjà reçu une réponse, et elle n’en prend qu’une. Rien de plus n’est nécessaire.",
    title_cancelled: "Cette question a été retirée",
    refusal_cancelled:
      "Cette question a été retirée : sa conversation a été annulée. Rien de plus n’est nécessaire.",
    title_closed: "Cette question a été retirée",
    refusal_closed:
      "Cette question a été retirée : la conversation a continué sans elle, elle ne prend " +
      "donc plus de réponse. Rien de plus n’est nécessaire.",
    title_finished: "Cette conversation est terminée",
    refusal_finished:
      "Cette conversation est terminée : la question ne prend donc plus de réponse. " +
      "Rien de plus n’est nécessaire.",
    title_not_found: "Question introuvable",
    refusal_not_found:
      "Cette question n’existe plus : on ne peut donc pas y répondre. Rien de plus n’est nécessaire.",
    answer_invalid_payload:
      "Cette réponse ne correspond pas à la question : elle n’a pas été enregistrée. " +
      "Vérifiez ce que vous avez saisi et renvoyez-la.",
    answer_payload_too_large:
      "Cette réponse est trop longue : elle n’a pas été enregistrée. Raccourcissez-la et renvoyez-la.",
    answer_request_too_large:
      "Cette réponse est trop longue : elle n’a pas été enregistrée. Raccourcissez-la et renvoyez-la.",
    answer_store_unavailable:
      "Votre réponse n’a peut-être pas été enregistrée : le service est brièvement " +
      "indisponible. Patientez un instant et renvoyez-la.",
    answer_fallback:
      "Votre réponse n’a pas pu être enregistrée. Renvoyez-la dans un instant ; si elle ne " +
      "passe toujours pas, demandez à la personne qui vous a envoyé le lien comment répondre " +
      "autrement.",
  },
};

/** The language to use: the requested one if shipped, else its base ("fr-CA" → "fr"). */
export function pickLanguage(...candidates) {
  for (const candidate of candidates) {
    if (!candidate) continue;
    const lang = String(candidate).toLowerCase();
    if (STRINGS[lang]) return lang;
    const base = lang.split("-")[0];
    if (STRINGS[base]) return base;
  }
  return "en";
}

/** A translate function for `lang`, with `overrides` (an object of strings) on top. */
export function translator(lang, overrides = {}) {
  const table = { ...STRINGS.en, ...STRINGS[lang], ...overrides };
  return (key, vars = {}) => {
    const template = table[key] ?? key;
    return template.replace(/\{(\w+)\}/g, (_, name) => (name in vars ? String(vars[name]) : `{${name}}`));
  };
}

/** A server error code said for a visitor. */
export function reason(t, code) {
  const key = `err_${code}`;
  const text = t(key);
  return text === key ? t("err_unknown", { code: String(code).slice(0, 40) }) : text;
}
