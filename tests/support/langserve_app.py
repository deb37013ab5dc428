"""A RAG app over a docs folder, written as LangChain's tutorials write one and served by LangServe.

It is the assistant a team builds from the RAG tutorial and its "returning sources" how-to,
so the tests measure, as a target, what a real LangChain app sends rather than what a server
written beside DocPilot's reader sends:

    DirectoryLoader(folder, glob="**/*.md", loader_cls=TextLoader)  # metadata {"source": "<folder>/<path>.md"}
    MarkdownHeaderTextSplitter on "#", "##", "###"                    # adds "Header 1", "Header 2", "Header 3"
    BM25Retriever.from_documents(splits, k=4)
    RunnablePassthrough.assign(context=itemgetter("question") | retriever).assign(answer=prompt | model | parser)
    add_routes(app, chain.with_types(...), path="/rag")               # POST /rag/invoke, /rag/stream, ...

The input is the tutorial's dict, ``{"question": "..."}``, so LangServe takes
``{"input": {"question": "..."}}`` (a bare string is refused with 422). The output is
``{"question", "context": [Document, ...], "answer"}``. The model is a fake one (no network,
no weights): it answers with the first sentence of the context it is given, that is of the top
Document, and streams it a word at a time.

What LangServe 0.3 sends for it (compact JSON; the headings' text as written, ``{ #id }`` included):

    POST /rag/invoke  200 application/json
                      {"output":{"question":"...","context":[{"id":null,"metadata":{"source":"/abs/docs/targets.md",
                      "Header 1":"...","Header 2":"... { #sources }"},"page_content":"...","type":"Document"},...],
                      "answer":"..."},"metadata":{"run_id":"<uuid>","feedback_tokens":[]}}
    POST /rag/stream  200 text/event-stream, lines ended by CRLF:
                      event: metadata / data: {"run_id": "<uuid>"}
                      event: data / data: {"question":"..."}
                      event: data / data: {"context":[Document, ...]}     (as in /invoke)
                      event: data / data: {"answer":"A"}, {"answer":" "}, {"answer":"golden"}, ...
                      event: end                                          (no data line)

The same app takes follow-ups as LangChain's "add chat history" tutorial writes a chain for
them: a question and its ``chat_history``, the earlier turns as LangChain messages
(``{"type": "human" | "ai", "content": ...}``). With a history, the question is first
rewritten into a standalone one from the history (``MessagesPlaceholder("chat_history")``
in a contextualizing prompt), and that is what the retriever searches; the answering prompt
carries the history too. Its fake rewriter joins the earlier questions and the new one.

    POST /rag-chat/invoke   {"input": {"question": "...", "chat_history": [message, ...]}}
                            → {"output": {"question", "chat_history", "context", "answer"}, ...}
    POST /chat/invoke       LangServe's chat playground input, {"input": {"messages": [message, ...]}}:
                            the last message is the question, the ones before it the history

``section_ids`` is the tests' oracle: it names the section of each returned Document from its
metadata and the docs themselves, without DocPilot's target code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from operator import itemgetter
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from langchain_community.document_loaders import DirectoryLoader, TextLoader
from langchain_community.retrievers import BM25Retriever
from langchain_core.documents import Document
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from langchain_text_splitters import MarkdownHeaderTextSplitter
from langserve import add_routes
from pydantic import BaseModel

from docpilot.corpus.pages import Corpus, load_corpus
from tests.support.openai_server import _bind, running

HEADERS = [("#", "Header 1"), ("##", "Header 2"), ("###", "Header 3")]
"""The headings the splitter cuts at, and the metadata key each one's text goes under."""

PROMPT = ChatPromptTemplate.from_template(
    "You are an assistant for question-answering tasks. Use the following pieces of retrieved context "
    "to answer the question. If you don't know the answer, just say that you don't know. Use three "
    "sentences maximum and keep the answer concise.\nQuestion: {question} \nContext: {context} \nAnswer:"
)
"""The tutorial's prompt (``rlm/rag-prompt``), written out so nothing is pulled from a hub."""

_SENTENCE = re.compile(r"\S.*?(?:[.!?](?=\s|$)|$)", re.DOTALL)
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_ATTRIBUTES = re.compile(r"\s*\{[^{}]*\}\s*$")
_NOT_WORD = re.compile(r"[^\w ]|_")


def load_splits(folder: str | Path) -> list[Document]:
    """The folder's pages cut at their headings, each split keeping the page's ``source``."""
    pages = DirectoryLoader(str(folder), glob="**/*.md", loader_cls=TextLoader).load()
    splitter = MarkdownHeaderTextSplitter(headers_to_split_on=HEADERS)
    splits = []
    for page in pages:
        for split in splitter.split_text(page.page_content):
            split.metadata = {**page.metadata, **split.metadata}
            splits.append(split)
    return splits


def format_docs(docs: Sequence[Document]) -> str:
    return "\n\n".join(doc.page_content for doc in docs)


def _first_sentence(prompt: PromptValue) -> str:
    context = prompt.to_string().partition("\nContext: ")[2].rpartition(" \nAnswer:")[0]
    found = _SENTENCE.search(" ".join(context.split()))
    return found.group(0) if found else "I don't know."


def _model(prompt: PromptValue) -> GenericFakeChatModel:
    """The chat model for one prompt: it will say the first sentence of the context, in chunks of a word."""
    return GenericFakeChatModel(messages=iter([AIMessage(content=_first_sentence(prompt))]))


class Question(BaseModel):
    """What /rag takes: the tutorial's input."""

    question: str


class Answer(BaseModel):
    """What /rag gives: the question, the Documents retrieved for it, in rank order, and the answer."""

    question: str
    context: list[Document]
    answer: str


def build_retriever(folder: str | Path) -> BM25Retriever:
    return BM25Retriever.from_documents(load_splits(folder), k=4)


def build_chain(folder: str | Path) -> Runnable:
    """The tutorial's chain that returns its sources: ``{"question"}`` in, ``{"question", "context", "answer"}`` out."""
    retriever = build_retriever(folder)
    rag_chain_from_docs = (
        RunnablePassthrough.assign(context=lambda x: format_docs(x["context"]))
        | PROMPT
        | RunnableLambda(_model)  # a lambda that returns a runnable runs it, streaming when the chain streams
        | StrOutputParser()
    )
    chain = RunnablePassthrough.assign(context=itemgetter("question") | retriever).assign(answer=rag_chain_from_docs)
    # LangChain infers the output schema {"question", "answer"} for this chain, and LangServe's
    # /invoke keeps only the schema's keys: without declared types it drops the context
    # (langchain-ai/langchain#17460, #17703). /stream sends every key either way.
    return chain.with_types(input_type=Question, output_type=Answer)


CONTEXTUALIZE = ChatPromptTemplate.from_messages([
    ("system", "Given a chat history and the latest user question which might reference context in the chat "
               "history, formulate a standalone question which can be understood without the chat history. Do "
               "NOT answer the question, just reformulate it if needed and otherwise return it as is."),
    MessagesPlaceholder("chat_history"),
    ("human", "{question}"),
])
"""The tutorial's prompt that turns a follow-up into a standalone question."""

CHAT_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "You are an assistant for question-answering tasks. Use the following pieces of retrieved context "
               "to answer the question. If you don't know the answer, just say that you don't know. Use three "
               "sentences maximum and keep the answer concise.\n\nContext: {context}"),
    MessagesPlaceholder("chat_history"),
    ("human", "{question}"),
])
"""The tutorial's answering prompt with the chat history before the question."""


def standalone_question(question: str, chat_history: Sequence[AnyMessage]) -> str:
    """What the fake rewriter makes of a follow-up: the earlier questions and the new one, joined."""
    return " ".join([*(m.content for m in chat_history if isinstance(m, HumanMessage)), question])


def _rewriter(prompt: PromptValue) -> GenericFakeChatModel:
    *history, last = prompt.to_messages()[1:]  # the system message first, the question last
    return GenericFakeChatModel(messages=iter([AIMessage(content=standalone_question(last.content, history))]))


def _chat_model(prompt: PromptValue) -> GenericFakeChatModel:
    context = prompt.to_messages()[0].content.partition("\n\nContext: ")[2]
    found = _SENTENCE.search(" ".join(context.split()))
    return GenericFakeChatModel(messages=iter([AIMessage(content=found.group(0) if found else "I don't know.")]))


class ChatQuestion(BaseModel):
    """What /rag-chat takes: the tutorial's question and the chat so far."""

    question: str
    chat_history: list[AnyMessage] = []


class ChatAnswer(BaseModel):
    """What /rag-chat gives: its input, the Documents retrieved for the standalone question, and the answer."""

    question: str
    chat_history: list[AnyMessage]
    context: list[Document]
    answer: str


class ChatMessages(BaseModel):
    """LangServe's chat playground input: the conversation, its last message the question."""

    messages: list[AnyMessage]


def build_chat_chain(folder: str | Path) -> Runnable:
    """The tutorial's chain with chat history: a follow-up is searched as the standalone question it is rewritten into."""
    retriever = build_retriever(folder)

    def search_question(inputs: dict) -> Runnable | str:
        if inputs.get("chat_history"):
            return CONTEXTUALIZE | RunnableLambda(_rewriter) | StrOutputParser()
        return inputs["question"]

    answer = (
        RunnablePassthrough.assign(context=lambda x: format_docs(x["context"]))
        | CHAT_PROMPT
        | RunnableLambda(_chat_model)
        | StrOutputParser()
    )
    chain = RunnablePassthrough.assign(context=RunnableLambda(search_question) | retriever).assign(answer=answer)
    return chain.with_types(input_type=ChatQuestion, output_type=ChatAnswer)


def build_playground_chain(folder: str | Path) -> Runnable:
    """The chat chain behind LangServe's chat playground input: the messages, the last one the question."""
    def split(inputs: dict) -> dict:
        *history, last = inputs["messages"]
        return {"question": last.content, "chat_history": history}

    chain = RunnableLambda(split) | build_chat_chain(folder)
    return chain.with_types(input_type=ChatMessages, output_type=ChatAnswer)


def build_app(folder: str | Path) -> FastAPI:
    app = FastAPI(title="Docs Q&A")
    add_routes(app, build_chain(folder), path="/rag")
    add_routes(app, build_chat_chain(folder), path="/rag-chat")
    add_routes(app, build_playground_chain(folder), path="/chat", playground_type="chat")
    return app


@contextmanager
def serving(docs_folder: str | Path) -> Iterator[str]:
    """Serve the app over ``docs_folder`` on a free port of 127.0.0.1 in a background thread; yields the base URL.

    The folder is passed on as given: the Documents' ``source`` is that folder joined with
    the page's path, absolute when the folder is.
    """
    # sse-starlette keeps one exit event for the process, bound to the event loop of the first app that
    # streamed; a second app's server runs its own loop, so the event is made anew for it.
    from sse_starlette.sse import AppStatus

    AppStatus.should_exit_event = None
    sock = _bind()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(build_app(docs_folder), log_config=None, access_log=False,
                                           lifespan="off", timeout_graceful_shutdown=1))
    with running(server, sock, "the LangServe app"):
        yield f"http://127.0.0.1:{port}"


def retrieve(docs_folder: str | Path, question: str) -> list[Document]:
    """The Documents the app returns as ``context`` for ``question``, in its order, computed in this process."""
    return _retriever(str(docs_folder)).invoke(question)


@cache
def _retriever(folder: str) -> BM25Retriever:
    return build_retriever(folder)


def section_ids(documents: Sequence[Document | Mapping], docs_folder: str | Path) -> list[str]:
    """The section id (``page#anchor``) of each Document, in order: Documents as the app returns them or as JSON.

    The page is the ``source`` path under the folder without ``.md`` (an ``index`` file names
    its folder); the section is the deepest heading in the metadata, found in the page by the
    chain of headings above it, as DocPilot's corpus loader reads the page (which gives
    explicit ids and the suffixes of repeated headings). Text before a page's first heading
    is ``page#``.
    """
    folder = Path(docs_folder).resolve()
    corpus = _corpus(str(folder))
    return [_section_id(doc.metadata if isinstance(doc, Document) else doc["metadata"], folder, corpus)
            for doc in documents]


@cache
def _corpus(folder: str) -> Corpus:
    return load_corpus(folder)


def _section_id(metadata: Mapping[str, str], folder: Path, corpus: Corpus) -> str:
    stem = Path(metadata["source"]).resolve().relative_to(folder).with_suffix("").as_posix()
    page = "index" if stem == "index" else stem.removesuffix("/index")
    chain = tuple(_words(metadata[key]) if key in metadata else None for _, key in HEADERS)
    if not any(chain):
        return f"{page}#"
    found = [anchor for anchor, heads in _heading_chains(corpus, page) if heads == chain]
    if len(found) != 1:
        raise LookupError(f"{len(found)} sections of {page} sit under the headings {chain} of {metadata['source']}: "
                          "a heading repeated under the same headings is not told apart by metadata; rename one")
    return f"{page}#{found[0]}"


def _heading_chains(corpus: Corpus, page: str) -> Iterator[tuple[str, tuple[str | None, ...]]]:
    """Each section of levels 1 to 3 of the page, with the words of the headings the splitter would put above it."""
    open_heads: dict[int, str] = {}
    for section in corpus.pages[page].sections:
        if not 1 <= section.level <= len(HEADERS):
            continue
        open_heads = {level: head for level, head in open_heads.items() if level < section.level}
        open_heads[section.level] = _words(section.title)
        yield section.anchor, tuple(open_heads.get(level) for level in range(1, len(HEADERS) + 1))


def _words(heading: str) -> str:
    """A heading's text to compare, written in Markdown or as plain text: links to their text, no attribute
    list, no markup or punctuation, lowercase."""
    text = _ATTRIBUTES.sub("", _LINK.sub(r"\1", heading))
    return " ".join(_NOT_WORD.sub("", text.lower()).split())
